// tests/deploy/validate.mjs - checks the Kubernetes manifests without a
// cluster: every document against the Kubernetes API schema of its kind
// (kubernetes-models, generated from the Kubernetes OpenAPI definitions),
// then what vramkit's pods need: a GPU from the device plugin, liveness and
// readiness on /healthz, Prometheus scrape annotations naming the port the
// probes use, and the stream file mounted from a ConfigMap holding it.
// Writes each ConfigMap's streams.json into OUT_DIR (if given) so that the
// caller can hand it to `vramkit config`.
//   node validate.mjs [--out DIR] FILE.yaml...
import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';

const args = process.argv.slice(2);
let out = null;
if (args[0] === '--out') { out = args[1]; args.splice(0, 2); }
if (!args.length) { console.error('usage: node validate.mjs [--out DIR] FILE.yaml...'); process.exit(2); }

const problems = [];
const docs = [];
for (const file of args) {
  const parsed = YAML.parseAllDocuments(fs.readFileSync(file, 'utf8'));
  parsed.forEach((d, i) => {
    const where = `${path.basename(file)} document ${i + 1}`;
    if (d.errors.length) { problems.push(`${where}: YAML: ${d.errors[0].message}`); return; }
    const doc = d.toJS();
    if (doc) docs.push({ where, doc });
  });
}

async function schemaCheck({ where, doc }) {
  const [group, version] = doc.apiVersion.includes('/') ? doc.apiVersion.split('/') : [null, doc.apiVersion];
  const mod = `kubernetes-models/${group ? group + '/' : ''}${version}/${doc.kind}`;
  let Cls;
  try { Cls = (await import(mod)).default ?? (await import(mod))[doc.kind]; }
  catch { problems.push(`${where}: no schema for ${doc.apiVersion} ${doc.kind}`); return; }
  if (!Cls) Cls = (await import(mod))[doc.kind];
  try { new Cls(doc).validate(); }
  catch (e) { problems.push(`${where}: ${doc.kind} ${doc.metadata?.name}: ${e.message}`); }
}

function podCheck({ where, doc }, configMaps) {
  const tpl = doc.spec?.template;
  if (!tpl) return;
  const name = `${where}: ${doc.kind} ${doc.metadata.name}`;
  const ann = tpl.metadata?.annotations ?? {};
  if (ann['prometheus.io/scrape'] !== 'true') problems.push(`${name}: prometheus.io/scrape is not "true"`);
  if (ann['prometheus.io/path'] !== '/metrics') problems.push(`${name}: prometheus.io/path is not /metrics`);
  for (const c of tpl.spec.containers) {
    const gpus = c.resources?.limits?.['nvidia.com/gpu'];
    if (!(Number(gpus) >= 1)) problems.push(`${name}: container ${c.name} asks for no nvidia.com/gpu`);
    const port = (c.ports ?? []).find(p => String(p.containerPort) === String(ann['prometheus.io/port']));
    if (!port) problems.push(`${name}: prometheus.io/port ${ann['prometheus.io/port']} is no port of ${c.name}`);
    for (const probe of ['livenessProbe', 'readinessProbe']) {
      const g = c[probe]?.httpGet;
      if (!g || g.path !== '/healthz') problems.push(`${name}: ${c.name} has no ${probe} on /healthz`);
      else if (port && g.port !== port.name && String(g.port) !== String(port.containerPort))
        problems.push(`${name}: ${c.name}'s ${probe} is not on the metrics port`);
    }
    const listen = (c.args ?? []).indexOf('--listen');
    if (listen < 0 || !String(c.args[listen + 1]).endsWith(':' + ann['prometheus.io/port']))
      problems.push(`${name}: ${c.name} does not --listen on port ${ann['prometheus.io/port']}`);
    const cfg = (c.args ?? []).indexOf('--config');
    if (cfg < 0) { problems.push(`${name}: ${c.name} has no --config stream file`); continue; }
    const file = c.args[cfg + 1];
    const mount = (c.volumeMounts ?? []).find(m => file.startsWith(m.mountPath + '/'));
    const vol = mount && (tpl.spec.volumes ?? []).find(v => v.name === mount.name);
    const cm = vol?.configMap && configMaps.get(vol.configMap.name);
    const key = mount && file.slice(mount.mountPath.length + 1);
    if (!cm) problems.push(`${name}: ${file} is not mounted from a ConfigMap of these files`);
    else if (!(key in (cm.data ?? {}))) problems.push(`${name}: ConfigMap ${vol.configMap.name} has no ${key}`);
    else {
      let f = null;
      try { f = JSON.parse(cm.data[key]); } catch (e) { problems.push(`${name}: ${key} is not JSON: ${e.message}`); }
      const streams = f?.streams ?? [];
      if (f && (!Array.isArray(streams) || !streams.every(s => typeof s.url === 'string')))
        problems.push(`${name}: ${key}: streams must be an array of objects with a url`);
    }
  }
}

for (const d of docs) await schemaCheck(d);
const configMaps = new Map(docs.filter(d => d.doc.kind === 'ConfigMap').map(d => [d.doc.metadata.name, d.doc]));
for (const d of docs) podCheck(d, configMaps);
if (out) {
  fs.mkdirSync(out, { recursive: true });
  for (const [name, cm] of configMaps)
    for (const [key, text] of Object.entries(cm.data ?? {}))
      fs.writeFileSync(path.join(out, `${name}.${key}`), text);
}
for (const p of problems) console.error(`validate: ${p}`);
console.log(`validate: ${docs.length} documents, ${problems.length} problems`);
process.exit(problems.length ? 1 : 0);
