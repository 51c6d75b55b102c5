/**
 * The authenticated caller, as the API Gateway authorizer describes it. In a file of its own so
 * lib/intake/jwt.ts (which builds JWT callers) and lib/intake/tenancy.ts (which matches callers to
 * teams) both use it without importing each other.
 */
export interface Caller {
  /**
   * IAM authorizer: the caller's ARN as STS presents it (`requestContext.authorizer.iam.userArn`):
   * an IAM user `arn:aws:iam::A:user/NAME`, a role session `arn:aws:sts::A:assumed-role/ROLE/SESSION`,
   * a federated user `arn:aws:sts::A:federated-user/NAME`. The local host also puts `local:NAME` here.
   */
  iamArn?: string;
  /** JWT authorizer: the value of the configured principal claim (`auth.jwt.principalClaim`, default `sub`). */
  sub?: string;
  /** JWT authorizer: the values of the configured group claims (default `groups`, `cognito:groups`). */
  groups: string[];
}
