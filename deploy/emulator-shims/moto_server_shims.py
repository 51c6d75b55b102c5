"""moto's server with the CloudFormation behaviours Gantry's deploy relies on made to match AWS.

Run as `<moto venv>/bin/python deploy/emulator-shims/moto_server_shims.py -H 127.0.0.1 -p PORT`
(the same arguments as `moto_server`). Written for moto 5.2.6 (scripts/ci-install.sh pins it);
each shim checks that the moto internals it replaces still exist and stops the server if not.

Every shim below names the moto limitation it works around and the upstream issue (or says that
none was found). None changes what a template means: the template deployed is the one
`serverless package` writes; the emulator is made to do what CloudFormation does with it.
docs/deploy-tier.md lists them.
"""

import re
import sys

import moto
from moto.cloudformation import models, parsing
from moto.cloudformation.models import CloudFormationBackend, Event
from moto.cloudformation.parsing import ResourceMap

EXPECTED_MOTO = "5.2.6"


def _require(owner, name):
    if not hasattr(owner, name):
        sys.exit(
            f"moto_server_shims: moto {moto.__version__} has no {owner.__name__}.{name}; "
            f"these shims were written for moto {EXPECTED_MOTO}"
        )
    return getattr(owner, name)


# ---- 1. Fn::Sub variables whose names start with a digit ---------------------------------------
# moto substitutes the variable map of `Fn::Sub: [template, {name: value}]` with Python's
# string.Template, whose identifiers cannot start with a digit. serverless-step-functions names
# the variables with md5 hex digests (`${915e5e4c…}`), so they stay unsubstituted, are then read
# as Refs to resources of that name, and moto answers 500 (KeyError). CloudFormation accepts any
# name of alphanumerics, `_`, `.` and `:`. Upstream: no moto issue found (searched 2026-12-05).
_clean_json = _require(parsing, "clean_json")


def clean_json(resource_json, resources_map):
    if isinstance(resource_json, dict) and isinstance(resource_json.get("Fn::Sub"), list):
        template, mapping = resource_json["Fn::Sub"]
        for name, value in mapping.items():
            template = template.replace("${" + name + "}", str(clean_json(value, resources_map)))
        return _clean_json({"Fn::Sub": template}, resources_map)
    return _clean_json(resource_json, resources_map)


# The module's own recursive calls look the name up at call time: they get this one too.
parsing.clean_json = clean_json


# ---- 2. ValidateTemplate refuses templates cfn-lint only warns about ----------------------------
# moto answers ValidateTemplate with cfn-lint's first match, warnings included (W3005, a redundant
# DependsOn, refused serverless-step-functions' template); CloudFormation refuses only invalid
# templates. Gantry keeps its template at 0 errors and 0 warnings (npm run cfn-lint), so this only
# matters when a warning slips in: the deploy tier then still tests the deploy, and cfn-lint's
# own test fails. Upstream: getmoto/moto#8585 and PR #10232 discuss when moto runs cfn-lint; no
# issue on warnings being fatal was found.
_validate_template = _require(CloudFormationBackend, "validate_template")


def validate_template(self, template):
    return [m for m in _validate_template(self, template) if not str(m.rule.id).startswith("W")]


CloudFormationBackend.validate_template = validate_template


# ---- 3 and 4. ExecuteChangeSet: no Outputs afterwards, no rollback on failure -------------------
# 3. moto builds a stack's Outputs when the stack is created or updated directly, not when a change
#    set is executed: DescribeStacks then has no Outputs, and serverless-step-functions' after-deploy
#    hook fails (`Outputs.filter` of undefined). Upstream: no moto issue found (getmoto/moto#3032 is
#    about DescribeChangeSet's output, fixed in PR #3033).
# 4. moto executes a change set in the request and has no rollback ("TODO: handle execution errors
#    and implement rollback" in moto/cloudformation/models.py): a resource that fails leaves every
#    resource created before it in place, the request answers 500, and the stack keeps its old
#    template. CloudFormation rolls the operation back: it deletes the resources the operation
#    created, except those whose DeletionPolicy is Retain (RetainExceptOnCreate and Delete are
#    deleted), and the stack ends in UPDATE_ROLLBACK_COMPLETE (ROLLBACK_COMPLETE for a create).
#    Upstream: no moto issue found; getmoto/moto PR #6115 added Retain for stack deletion only.
#    Resources the failed operation modified or removed are not restored (Gantry's deploys add the
#    stack's resources in one update after serverless' create of the deployment bucket).
_find_failing = {}
_parse_and_create_resource = _require(parsing, "parse_and_create_resource")


def parse_and_create_resource(logical_id, resource_json, resources_map, account_id, region_name):
    try:
        return _parse_and_create_resource(logical_id, resource_json, resources_map, account_id, region_name)
    except Exception as err:
        # The innermost resource is the one that failed (Refs create what they name first).
        if not hasattr(err, "gantry_logical_id"):
            err.gantry_logical_id = logical_id
            err.gantry_resource_type = resource_json.get("Type", "")
        raise


parsing.parse_and_create_resource = parse_and_create_resource
_require(CloudFormationBackend, "execute_change_set")

KEPT_ON_CREATE_ROLLBACK = {"Retain"}


def _resource_event(stack, logical_id, resource_type, status, reason=None, physical_id=None):
    stack.events.append(
        Event(
            stack_id=stack.stack_id,
            stack_name=stack.name,
            logical_resource_id=logical_id,
            physical_resource_id=physical_id or logical_id,
            resource_type=resource_type,
            resource_status=status,
            resource_status_reason=reason,
            resource_properties=None,
        )
    )


def _roll_back(stack, resource_map, old_resources, old_template, err, create):
    new_resources = resource_map._resource_json_map
    failed_id = getattr(err, "gantry_logical_id", "")
    failed_type = getattr(err, "gantry_resource_type", "")
    reason = f"{type(err).__name__}: {err}"
    prefix = "" if create else "UPDATE_"
    _resource_event(stack, failed_id or stack.name, failed_type, "CREATE_FAILED", reason)
    stack._add_stack_event(f"{prefix}ROLLBACK_IN_PROGRESS", resource_status_reason=reason)
    created = [
        name
        for name in new_resources
        if name not in old_resources and name in resource_map._parsed_resources
    ]
    pending = [n for n in created if new_resources[n].get("DeletionPolicy") not in KEPT_ON_CREATE_ROLLBACK]
    # Dependents first: retry what a dependency violation refused, as moto's own delete does.
    for _ in range(len(pending) + 1):
        if not pending:
            break
        for name in list(pending):
            parsed = resource_map._parsed_resources.get(name)
            try:
                if parsed is not None and not isinstance(parsed, str):
                    resource_map._delete_resource(parsed, new_resources[name])
            except Exception:
                continue
            resource_map._parsed_resources.pop(name, None)
            pending.remove(name)
            _resource_event(stack, name, new_resources[name].get("Type", ""), "DELETE_COMPLETE")
    for name in created:
        if name in resource_map._parsed_resources and name not in pending:
            # Retained (DeletionPolicy Retain): out of the stack, still in its service.
            resource_map._parsed_resources.pop(name, None)
            _resource_event(stack, name, new_resources[name].get("Type", ""), "DELETE_SKIPPED")
    resource_map._resource_json_map = old_resources
    resource_map._template = old_template
    status = f"{prefix}ROLLBACK_FAILED" if pending else f"{prefix}ROLLBACK_COMPLETE"
    stack._add_stack_event(status)
    stack.status = status


def execute_change_set(self, change_set_name, stack_name=None):
    change_set = self.change_sets.get(change_set_name)
    if change_set is None:
        # By name: the newest of the live stack's (serverless reuses one change set name, and a
        # deleted stack's change sets stay listed).
        named = [
            cs
            for cs in self.change_sets.values()
            if cs.change_set_name == change_set_name
            and cs.stack_id in self.stacks
            and stack_name in (None, cs.stack_name, cs.stack_id)
        ]
        change_set = named[-1] if named else None
    if change_set is None:
        raise models.ValidationError(stack_name)
    stack = self.stacks[change_set.stack_id]
    create = change_set.change_set_type == "CREATE"
    action = "CREATE" if create else "UPDATE"
    stack._add_stack_event(f"{action}_IN_PROGRESS", resource_status_reason="User Initiated")
    resource_map = stack.resource_map
    old_resources = dict(getattr(resource_map, "_resource_json_map", None) or {})
    old_template = getattr(resource_map, "_template", None)
    try:
        change_set.apply()
    except Exception as err:  # noqa: BLE001 — every failure rolls back, as CloudFormation's does
        _roll_back(stack, resource_map, old_resources, old_template, err, create)
        change_set.execution_status = "EXECUTE_FAILED"
        return
    stack._add_stack_event(f"{action}_COMPLETE")
    change_set.execution_status = "EXECUTE_COMPLETE"
    stack.status = f"{action}_COMPLETE"
    stack.template = change_set.template
    stack._parse_template()
    stack.output_map = stack._create_output_map()


CloudFormationBackend.execute_change_set = execute_change_set


# ---- 5. DeleteStack deletes RetainExceptOnCreate resources --------------------------------------
# moto's stack deletion keeps only `DeletionPolicy: Retain`. CloudFormation treats
# RetainExceptOnCreate as Retain for every operation but the rollback of the one that created the
# resource, stack deletion included: Gantry's bucket and state table outlive `serverless remove`.
# Upstream: no moto issue found; getmoto/moto PR #6115 added Retain only.
_require(ResourceMap, "delete")
KEPT_ON_DELETE = {"Retain", "RetainExceptOnCreate"}


def delete(self):
    remaining = {k for k, v in self._resource_json_map.items() if v.get("DeletionPolicy") not in KEPT_ON_DELETE}
    last_error = None
    for _ in range(len(remaining) + 1):
        if not remaining:
            break
        for name in list(remaining):
            parsed = self._parsed_resources.get(name)
            try:
                if parsed is not None and not isinstance(parsed, str):
                    self._delete_resource(parsed, self._resource_json_map[name])
                    self._parsed_resources.pop(name, None)
            except Exception as err:  # noqa: BLE001 — a dependency violation: retried next pass
                last_error = err
                continue
            remaining.discard(name)
    if remaining and last_error is not None:
        raise last_error


ResourceMap.delete = delete


# ---- 6. Inline role policies from a template are kept as Python dicts -------------------------
# moto's AWS::IAM::Role stores each `Policies[].PolicyDocument` as the parsed dict, where
# PutRolePolicy stores JSON text; GetRolePolicy then returns the dict's Python repr (single
# quotes), which no client can parse. Stored as JSON, as PutRolePolicy would. Upstream: no moto
# issue found (searched 2026-12-05).
import json  # noqa: E402

from moto.iam.models import Role  # noqa: E402

_put_policy = _require(Role, "put_policy")


def put_policy(self, policy_name, policy_json):
    if not isinstance(policy_json, str):
        policy_json = json.dumps(policy_json)
    return _put_policy(self, policy_name, policy_json)


Role.put_policy = put_policy


if __name__ == "__main__":
    if moto.__version__ != EXPECTED_MOTO:
        print(
            f"moto_server_shims: written for moto {EXPECTED_MOTO}, running on {moto.__version__}",
            file=sys.stderr,
        )
    from moto.server import main

    sys.argv[0] = re.sub(r"(-script\.pyw|\.exe)?$", "", sys.argv[0])
    sys.exit(main())
