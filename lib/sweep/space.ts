/**
 * The search space of a sweep and its grid. Pure: the sweep schema validates specs (min ≤ max,
 * step > 0, non-empty values, min > 0 on a log scale); these functions only refuse what would
 * otherwise turn into NaN or an endless grid.
 */

export type ParameterSpec =
  | {
      name: string;
      type: 'continuous';
      min: number;
      max: number;
      scale: 'linear' | 'log';
      gridPoints?: number | undefined; // as the request schema yields it
    }
  | { name: string; type: 'integer'; min: number; max: number; step: number } // values min, min+step, … ≤ max
  | { name: string; type: 'discrete'; values: number[] }
  | { name: string; type: 'categorical'; values: string[] };
export type ParameterValue = number | string;
export type Assignment = Record<string, ParameterValue>;

export type ContinuousSpec = Extract<ParameterSpec, { type: 'continuous' }>;
export type IntegerSpec = Extract<ParameterSpec, { type: 'integer' }>;

/**
 * Trial assignments end up in manifests, records and logs: six significant digits keep them
 * readable, and the clamp keeps a rounded bound (e.g. 0.1234567 → 0.123457) inside the space.
 */
export function roundInRange(value: number, min: number, max: number): number {
  const rounded = Number(value.toPrecision(6));
  return Math.min(max, Math.max(min, rounded));
}

/**
 * A continuous parameter mapped to the axis it is searched on (log for scale 'log'), so grid
 * points, random draws and TPE's Gaussians are all evenly spread where the user expects.
 */
export function toSearchAxis(spec: ContinuousSpec, value: number): number {
  if (spec.scale === 'linear') return value;
  if (!(spec.min > 0)) throw new RangeError(`parameter ${spec.name}: a log scale needs min > 0`);
  return Math.log(value);
}

/** The inverse of toSearchAxis, rounded and kept within [min, max]. */
export function fromSearchAxis(spec: ContinuousSpec, axisValue: number): number {
  const raw = spec.scale === 'log' ? Math.exp(axisValue) : axisValue;
  return roundInRange(raw, spec.min, spec.max);
}

/** Number of values on an integer parameter's step grid (0 when max < min). */
export function integerCount(spec: IntegerSpec): number {
  return Math.max(0, Math.floor((spec.max - spec.min) / spec.step) + 1);
}

/** The i-th value of an integer parameter; min + i·step rather than summing steps, so no drift. */
export function integerValue(spec: IntegerSpec, i: number): number {
  return spec.min + i * spec.step;
}

/** Number of grid values of one parameter. */
export function axisSize(spec: ParameterSpec): number {
  switch (spec.type) {
    case 'continuous':
      return spec.gridPoints === undefined
        ? Number.POSITIVE_INFINITY
        : Math.max(0, Math.floor(spec.gridPoints));
    case 'integer':
      return integerCount(spec);
    case 'discrete':
    case 'categorical':
      return spec.values.length;
  }
}

/** The i-th grid value of one parameter, 0 ≤ i < axisSize(spec). */
export function axisValue(spec: ParameterSpec, i: number): ParameterValue {
  switch (spec.type) {
    case 'continuous': {
      const n = axisSize(spec);
      // Both ends exactly, not via exp(log(x)), so a grid always contains min and max themselves.
      if (i === 0) return spec.min;
      if (i === n - 1) return spec.max;
      const lo = toSearchAxis(spec, spec.min);
      const hi = toSearchAxis(spec, spec.max);
      return fromSearchAxis(spec, lo + (i / (n - 1)) * (hi - lo));
    }
    case 'integer':
      return integerValue(spec, i);
    case 'discrete':
    case 'categorical':
      return spec.values[i]!;
  }
}

/**
 * Number of grid points: product over parameters (continuous: gridPoints, evenly spaced on its
 * scale incl. both ends; integer: floor((max-min)/step)+1; discrete/categorical: values.length).
 * Infinity when a continuous parameter has no gridPoints.
 */
export function gridSize(params: readonly ParameterSpec[]): number {
  let size = 1;
  for (const spec of params) size *= axisSize(spec);
  // 0 · Infinity would be NaN: an empty axis empties the grid whatever the others are.
  return Number.isNaN(size) ? 0 : size;
}

/**
 * The index-th point of the grid in a fixed order (last parameter varies fastest). Throws
 * RangeError outside [0, gridSize). A gridPoints of 1 yields min.
 */
export function gridPoint(params: readonly ParameterSpec[], index: number): Assignment {
  const size = gridSize(params);
  if (size === Number.POSITIVE_INFINITY) {
    throw new RangeError('no grid: a continuous parameter has no gridPoints');
  }
  if (!Number.isSafeInteger(index) || index < 0 || index >= size) {
    throw new RangeError(`grid index ${index} outside [0, ${size})`);
  }
  // Mixed-radix digits of index, computed from the last parameter so it varies fastest.
  const digits = new Array<number>(params.length);
  let rest = index;
  for (let p = params.length - 1; p >= 0; p--) {
    const n = axisSize(params[p]!);
    digits[p] = rest % n;
    rest = Math.floor(rest / n);
  }
  const assignment: Assignment = {};
  params.forEach((spec, p) => {
    assignment[spec.name] = axisValue(spec, digits[p]!);
  });
  return assignment;
}
