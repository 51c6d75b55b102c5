/**
 * The checkpoint contract: every run gets `GANTRY_CHECKPOINT_URI`
 * (`s3://<gantry bucket>/runs/<run id>/checkpoints/`), the same for all of its attempts. Training
 * code saves its state there and, when it starts, resumes from the newest checkpoint it finds: an
 * attempt started after an infrastructure failure (a lost node, a preemption) continues where the
 * last one saved instead of starting over. Gantry never reads or deletes what is there. Pure.
 */
export const checkpointPrefix = (runId: string) => `runs/${runId}/checkpoints/`;
export const checkpointUri = (bucket: string, runId: string) => `s3://${bucket}/${checkpointPrefix(runId)}`;
