/** The samplers a sweep can run, their settings filled in (lib/sweep/samplers.ts runs them). */
export type Algorithm =
  | { name: 'grid' }
  | { name: 'random'; seed: number }
  | {
      name: 'tpe';
      seed: number;
      /** Trials sampled at random before TPE takes over (history.length < startupTrials). */
      startupTrials: number;
      /** Draws from l(x), of which the best l/g is kept; default 24. */
      candidates?: number;
      /** A fixed fraction of the history, rounded up, as the good trials; default Optuna's ⌈n/10⌉, at most 25. */
      gamma?: number;
      /** One joint estimator over all parameters (Optuna's multivariate=True); default false. */
      multivariate?: boolean;
    }
  | {
      name: 'cmaes';
      seed: number;
      /** Trials with index < startupTrials are sampled at random and left out of CMA-ES's updates. */
      startupTrials: number;
      /** Trials per generation; default 4 + ⌊3 ln d⌋ (d: the numeric parameters searched). */
      popSize?: number;
      /**
       * How discrete and categorical parameters are drawn: 'random' (default, as Optuna's
       * CmaEsSampler hands them to its RandomSampler) or 'tpe' (univariate TPE on the history once
       * it holds TPE_STARTUP_FOR_OTHERS trials, like CmaEsSampler(independent_sampler=TPESampler())).
       */
      others?: 'random' | 'tpe';
    }
  | {
      name: 'gp';
      seed: number;
      /** Trials sampled at random before the Gaussian process takes over. */
      startupTrials: number;
    }
  | {
      name: 'nsga2';
      seed: number;
      /** Trials per generation; default 50 (Optuna's NSGAIISampler population_size). */
      popSize?: number;
      /** uniform (default, as Optuna) or sbx (simulated binary crossover on the numeric parameters). */
      crossover?: 'uniform' | 'sbx';
      /** Probability of a crossover (else a parent is copied); default 0.9. */
      crossoverProb?: number;
      /** Uniform crossover's probability of taking each parameter from the second parent; default 0.5. */
      swappingProb?: number;
      /** Probability of drawing each parameter afresh; default 1/d. */
      mutationProb?: number;
    };
