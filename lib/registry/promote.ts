import { aliasMovedEvent } from '../artifacts/events.ts';
import { manifestKey } from '../artifacts/layout.ts';
import type { ModelManifest } from '../artifacts/manifest.ts';
import type { ServingEvents } from '../artifacts/ports.ts';
import { ConcurrentUpdateError } from '../errors.ts';
import type { CallOptions, ObjectStore } from '../ports.ts';
import type { EvaluationNote } from '../run/record.ts';
import { AliasConflictError, type Aliases, type AliasPointer } from './aliases.ts';
import { decideEvaluated, type EvaluationState, evaluationKey } from './evaluation.ts';
import { teamIndexKey } from './layout.ts';
import {
  type Candidate,
  decide,
  type PromotionDecision,
  type PromotionPolicy,
  policiesFor,
} from './policy.ts';

/**
 * What a publish does to the model's aliases: each policy the team set for the model decides
 * (lib/registry/policy.ts); a promotion moves the alias conditionally (a lost race is decided
 * again against the winner) and tells the serving stage; `manual` leaves a pending candidate.
 * Idempotent: a retried NotifyServing finds the alias already at the version (`unchanged`).
 */
export function makePromoter(deps: {
  store: ObjectStore;
  aliases: Aliases;
  /** The team's promotion policies (config `teams[].promotion`). */
  policies: (team: string) => readonly PromotionPolicy[];
}) {
  const { store, aliases } = deps;

  const candidateOf = (m: ModelManifest): Candidate => ({ version: m.version, metrics: m.metrics });

  async function championOf(pointer: AliasPointer | undefined, opts?: CallOptions) {
    if (!pointer) return undefined;
    const m = await store.getJson<ModelManifest>(manifestKey(pointer.model, pointer.version), opts);
    return m ? candidateOf(m.value) : { version: pointer.version, metrics: {} };
  }

  async function decideOne(
    policy: PromotionPolicy,
    manifest: ModelManifest,
    serving: ServingEvents | undefined,
    opts?: CallOptions,
    evaluation?: EvaluationState,
  ): Promise<PromotionDecision> {
    // The evaluation applies to the policy that asked for it (and ran for its alias).
    const evaluated = policy.evaluation !== undefined && policy.policy === 'if-better';
    for (let attempt = 0; ; attempt++) {
      const current = (await aliases.get(manifest.model, policy.alias, opts))?.value;
      const champion = await championOf(current, opts);
      const decision = evaluated
        ? decideEvaluated(
            policy,
            candidateOf(manifest),
            champion,
            evaluation?.alias === policy.alias ? evaluation : undefined,
          )
        : decide(policy, candidateOf(manifest), champion);
      if (decision.outcome === 'pending') {
        await aliases.propose(
          {
            model: manifest.model,
            alias: policy.alias,
            version: manifest.version,
            runId: manifest.runId,
            requestedAt: manifest.timestamps.publishedAt,
            reason: decision.reason,
          },
          opts,
        );
      }
      if (decision.outcome === 'unchanged' && current?.version === manifest.version) {
        // A retried NotifyServing after this run's own move (its onMoved or serving message failed):
        // the same move again is a retry (aliases.ts isSameMove), which sends what was not sent.
        if (current.reason.startsWith(`run ${manifest.runId}: `)) {
          const again = await aliases.move(
            {
              model: manifest.model,
              alias: policy.alias,
              version: manifest.version,
              expectedVersion: current.previousVersion ?? null,
              movedBy: current.movedBy,
              reason: current.reason,
            },
            opts,
          );
          if (serving) await serving.publish(aliasMovedEvent(again, manifest.lineage.team), opts);
        }
      }
      if (decision.outcome !== 'promoted') return decision;
      try {
        const moved = await aliases.move(
          {
            model: manifest.model,
            alias: policy.alias,
            version: manifest.version,
            expectedVersion: current?.version ?? null,
            movedBy: `policy:${policy.policy}`,
            reason: `run ${manifest.runId}: ${decision.reason}`,
          },
          opts,
        );
        if (serving) await serving.publish(aliasMovedEvent(moved, manifest.lineage.team), opts);
        return decision;
      } catch (err) {
        // Another mover won: decide again against where the alias points now.
        if (!(err instanceof AliasConflictError) || attempt >= 4) throw err;
      }
    }
  }

  /**
   * Apply the team's policies for the manifest's model, in order; [] when it has none. `evaluation`:
   * what the run's evaluation step found (its policy decides over it, and the version keeps it).
   */
  async function promote(
    manifest: ModelManifest,
    serving: ServingEvents | undefined,
    opts?: CallOptions,
    evaluation?: EvaluationState,
  ): Promise<PromotionDecision[]> {
    // The team's model index (GET /v1/models reads one prefix): created once, kept.
    await store
      .putJson(
        teamIndexKey(manifest.lineage.team, manifest.model),
        { model: manifest.model, team: manifest.lineage.team, firstVersion: manifest.version },
        { ifNoneMatch: true },
        opts,
      )
      .catch((err) => {
        if (!(err instanceof ConcurrentUpdateError)) throw err;
      });
    const decisions: PromotionDecision[] = [];
    for (const policy of policiesFor(deps.policies(manifest.lineage.team), manifest.model)) {
      decisions.push(await decideOne(policy, manifest, serving, opts, evaluation));
    }
    if (evaluation && evaluation.status !== 'none') {
      // The version's evaluation, for the registry's views (kept when the version's files are retired).
      const decision = decisions.find((d) => d.alias === evaluation.alias);
      await store.putJson(
        evaluationKey(manifest.model, manifest.version),
        {
          model: manifest.model,
          version: manifest.version,
          runId: manifest.runId,
          ...evaluationNote(evaluation),
          ...(decision
            ? { decision: { alias: decision.alias, outcome: decision.outcome, reason: decision.reason } }
            : {}),
        },
        {},
        opts,
      );
    }
    return decisions;
  }

  /** The same for a version by number (read its manifest); [] when the manifest is missing. */
  async function promoteVersion(
    model: string,
    version: number,
    serving: ServingEvents | undefined,
    opts?: CallOptions,
    evaluation?: EvaluationState,
  ): Promise<PromotionDecision[]> {
    const manifest = await store.getJson<ModelManifest>(manifestKey(model, version), opts);
    return manifest ? promote(manifest.value, serving, opts, evaluation) : [];
  }

  return { promote, promoteVersion };
}

export type Promoter = ReturnType<typeof makePromoter>;

/** What the run, the sweep and the version record of an evaluation (never the execution's wait fields). */
export function evaluationNote(e: EvaluationState): EvaluationNote {
  const { timeoutSeconds: _t, job: _j, rounds: _r, deadlineAt: _d, alias: _a, ...note } = e;
  return note;
}
