'use strict';
/**
 * A local serverless plugin: drops from each resource's `DependsOn` the resources its properties
 * already reference (Ref, Fn::GetAtt, `${…}` in Fn::Sub). osls adds such entries to every function
 * (its role, reached by GetAtt), every HTTP API route (its integration, reached by Ref) and the
 * stage (its access-log group); cfn-lint reports each as W3005. CloudFormation orders a resource
 * after everything it references, so the template deploys in the same order without them.
 * Runs after the `resources:` section is merged, just before the template is written.
 */

/** Every logical id a value references. */
function referenced(value, out = new Set()) {
  if (Array.isArray(value)) {
    for (const v of value) referenced(v, out);
    return out;
  }
  if (!value || typeof value !== 'object') return out;
  for (const [key, v] of Object.entries(value)) {
    if (key === 'Ref' && typeof v === 'string') out.add(v);
    else if (key === 'Fn::GetAtt') {
      const target = Array.isArray(v) ? v[0] : typeof v === 'string' ? v.split('.')[0] : undefined;
      if (typeof target === 'string') out.add(target);
      referenced(v, out);
    } else if (key === 'Fn::Sub') {
      const text = Array.isArray(v) ? v[0] : v;
      if (typeof text === 'string') {
        for (const m of text.matchAll(/\$\{([A-Za-z0-9]+)(\.[A-Za-z0-9.]+)?\}/g)) out.add(m[1]);
      }
      referenced(Array.isArray(v) ? v.slice(1) : [], out);
    } else referenced(v, out);
  }
  return out;
}

/** The template with redundant (and duplicate) DependsOn entries removed; returns how many went. */
function tidyDependsOn(template) {
  let removed = 0;
  for (const resource of Object.values(template.Resources ?? {})) {
    if (resource.DependsOn === undefined) continue;
    const list = Array.isArray(resource.DependsOn) ? resource.DependsOn : [resource.DependsOn];
    const refs = referenced(resource.Properties ?? {});
    const kept = [...new Set(list)].filter((d) => !refs.has(d));
    removed += list.length - kept.length;
    if (kept.length === 0) delete resource.DependsOn;
    else resource.DependsOn = kept;
  }
  return removed;
}

class TemplateTidy {
  constructor(serverless) {
    this.hooks = {
      'before:aws:package:finalize:saveServiceState': () => {
        tidyDependsOn(serverless.service.provider.compiledCloudFormationTemplate);
      },
    };
  }
}

module.exports = TemplateTidy;
module.exports.tidyDependsOn = tidyDependsOn;
