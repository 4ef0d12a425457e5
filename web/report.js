/* web/report.js - draws the page of `vramkit report` from the JSON the
 * library put in #vram-report-data (its shape: src/observe/report*.c):
 * the OOM reports first, then each sample series (uPlot charts of live bytes
 * by owner and by kind, the pool against the device, fragmentation; alerts
 * as marks and a table), then each snapshot's block map coloured by owner.
 *
 * Every string that comes from an input (owner names are chosen by users)
 * reaches the page as text: text nodes, textContent, or attribute values set
 * with setAttribute. Nothing is ever parsed as HTML.
 *
 * For tests, window.vramReport describes what was drawn (charts and their
 * series, the colour of each owner) and document.body.dataset.ready is set
 * once everything is drawn. */
(function () {
  'use strict';

  const data = JSON.parse(document.getElementById('vram-report-data').textContent);
  const root = document.getElementById('report');
  const drawn = { charts: [], ownerColours: {}, blockMaps: [], errors: [] };
  window.vramReport = drawn;

  /* ---------------------------------------------------------------- DOM */

  // h('p', {class: 'x'}, 'text', child...): an element; strings become text nodes.
  function h(tag, attrs, ...children) {
    const e = document.createElement(tag);
    setAttrs(e, attrs);
    return add(e, children);
  }

  function setAttrs(e, attrs) {
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === 'style') Object.assign(e.style, v);
      else e.setAttribute(k, String(v));
    }
    return e;
  }

  // Append a child or a (nested) list of them; strings become text nodes.
  function add(e, children) {
    for (const c of [children].flat(Infinity)) {
      if (c === null || c === undefined || c === false) continue;
      e.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  function svg(tag, attrs) {
    return setAttrs(document.createElementNS('http://www.w3.org/2000/svg', tag), attrs);
  }

  // A table from column titles and rows of cells (strings, numbers or nodes).
  function table(cls, heads, rows) {
    return h('table', { class: cls },
      h('thead', null, h('tr', null, heads.map((t) => h('th', null, t)))),
      h('tbody', null, rows.map((r) => h('tr', null, r.map((c) => h('td', null, c))))));
  }

  // A definition list of [term, value] pairs, skipping empty values.
  function facts(pairs) {
    return h('dl', { class: 'facts' }, pairs.filter((p) => p[1] !== null && p[1] !== undefined &&
      p[1] !== '').map(([k, v]) => [h('dt', null, k), h('dd', null, v)]));
  }

  /* --------------------------------------------------------- formatting */

  function fmtBytes(b) {
    if (b === null || b === undefined || !isFinite(b)) return '–';
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
    let v = Math.abs(b), u = 0;
    while (v >= 1024 && u < units.length - 1) { v /= 1024; u++; }
    const digits = u === 0 ? 0 : v < 10 ? 2 : 1;
    return (b < 0 ? '-' : '') + v.toFixed(digits) + ' ' + units[u];
  }

  // Axis ticks: "20 MiB" rather than "20.0 MiB".
  function fmtTick(b) {
    return fmtBytes(b).replace(/\.0+ /, ' ');
  }

  // Tick steps for byte axes: 1, 2, 5, 10, 20, 50... of B, KiB, MiB, GiB, TiB,
  // so ticks fall on round sizes.
  const byteSteps = [];
  for (let e = 0; e <= 4; e++) {
    for (const m of [1, 2, 5, 10, 20, 50, 100, 200, 500]) byteSteps.push(m * Math.pow(1024, e));
  }

  // Time ticks in UTC, as precise as the span needs.
  function timeTicks(u, splits) {
    const span = u.scales.x.max - u.scales.x.min;
    return splits.map((v) => {
      const iso = new Date(v * 1000).toISOString();
      return span > 2 * 86400 ? iso.slice(5, 10) + ' ' + iso.slice(11, 16)
        : span > 7200 ? iso.slice(11, 16) : iso.slice(11, 19);
    });
  }

  function fmtNum(x, digits) {
    return x === null || x === undefined || !isFinite(x) ? '–' : Number(x).toFixed(digits);
  }

  // Seconds since the epoch as a UTC date and time (milliseconds if any).
  function fmtTime(t) {
    if (t === null || t === undefined || !isFinite(t)) return '–';
    const iso = new Date(t * 1000).toISOString();
    return iso.slice(0, 10) + ' ' + (t % 1 ? iso.slice(11, 23) : iso.slice(11, 19)) + ' UTC';
  }

  function fmtDuration(s) {
    if (!isFinite(s)) return '–';
    if (s < 120) return s.toFixed(1) + ' s';
    if (s < 7200) return (s / 60).toFixed(1) + ' min';
    return (s / 3600).toFixed(1) + ' h';
  }

  function quoted(s) { return '"' + s + '"'; }

  /* ------------------------------------------------------------ colours */

  // One colour per owner on the whole page, in order of first appearance.
  const palette = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2',
    '#bcbd22', '#17becf', '#393b79', '#637939', '#8c6d31', '#843c39', '#7b4173', '#3182bd',
    '#e6550d'];
  const ownerColour = new Map();
  function colourOf(owner) {
    if (!ownerColour.has(owner)) {
      const i = ownerColour.size;
      // Past the palette: hues a golden angle apart.
      const c = i < palette.length ? palette[i]
        : 'hsl(' + Math.round((i * 137.508) % 360) + ', 55%, 45%)';
      ownerColour.set(owner, c);
      drawn.ownerColours[owner] = c;
    }
    return ownerColour.get(owner);
  }
  const kindPalette = { weights: '#4e79a7', activations: '#f28e2b', io: '#59a14f',
    frames: '#e15759', workspace: '#b07aa1', decoder: '#76b7b2', other: '#9c755f' };
  const extraKinds = new Map();
  function kindColour(kind) {
    if (kindPalette[kind]) return kindPalette[kind];
    if (!extraKinds.has(kind)) extraKinds.set(kind, palette[(extraKinds.size + 5) % palette.length]);
    return extraKinds.get(kind);
  }
  const levelColour = { warning: '#e69500', critical: '#d62728', clear: '#2ca02c' };
  const FREE = '#e6e6e6';

  // Owners get their colours in the order a reader meets them: OOM reports,
  // then series, then snapshots.
  function assignColours() {
    for (const o of data.ooms) for (const w of o.owners) colourOf(w.owner);
    for (const s of data.series) for (const p of s.pools) for (const w of p.owners) colourOf(w.name);
    for (const s of data.snapshots) for (const w of s.block_owners) colourOf(w);
  }

  function swatch(colour) {
    return h('span', { class: 'swatch', style: { background: colour } });
  }

  /* ------------------------------------------------------------- header */

  function header() {
    document.title = data.title;
    const nav = [];
    data.ooms.forEach((o, i) => nav.push(h('a', { href: '#oom-' + i }, 'OOM in ' + quoted(o.pool))));
    data.series.forEach((s, i) => nav.push(h('a', { href: '#series-' + i }, 'Series ' + s.input)));
    data.snapshots.forEach((s, i) => nav.push(h('a', { href: '#snapshot-' + i },
      'Snapshot of ' + quoted(s.pool))));
    return h('header', null,
      h('h1', null, data.title),
      h('p', { class: 'meta' }, 'Generated ' + fmtTime(data.generated_time_s) + ' from ' +
        data.inputs.length + ' input' + (data.inputs.length === 1 ? '' : 's') + '.'),
      table('inputs', ['input', 'read as', 'what it holds'],
        data.inputs.map((i) => [h('code', null, i.name), i.type + ' (' + i.format + ')', i.summary])),
      nav.length ? h('nav', null, nav) : null);
  }

  /* -------------------------------------------------------- OOM reports */

  function usageBar(live, limit, colour) {
    if (!limit) return '';
    const pct = Math.min(100, (100 * live) / limit);
    return h('span', { class: 'bar', title: fmtNum(pct, 1) + '%' },
      h('span', { style: { width: pct + '%', background: colour } }));
  }

  function oomSection(o, i) {
    const r = o.request;
    const sec = h('section', { class: 'oom', id: 'oom-' + i });
    add(sec, [
      h('h2', null, 'Out of memory in pool ' + quoted(o.pool)),
      h('p', { class: 'diagnosis', 'data-cause': o.diagnosis.cause },
        h('span', { class: 'cause' }, o.diagnosis.cause.replace(/_/g, ' ')), ' ', o.diagnosis.line),
      facts([
        ['refused request', fmtBytes(r.size_bytes) + (r.owner ? ' for owner ' + quoted(r.owner) : '') +
          (r.kind ? ', kind ' + r.kind : '') + (r.stream ? ', stream ' + r.stream : '')],
        ['error', r.error ? r.error + (r.message ? ': ' + r.message : '') : r.message],
        ['when', o.time_s ? fmtTime(o.time_s) : null],
        ['pool', 'live ' + fmtBytes(o.live_bytes) + ', reserved ' + fmtBytes(o.reserved_bytes) +
          ', largest free block ' + fmtBytes(o.largest_free_bytes) + ', fragmentation ' +
          fmtNum(o.fragmentation_ratio, 3) + (o.policy ? ' (' + o.policy + (o.backend ? ' on ' + o.backend : '') + ')' : '')],
        ['device', o.capacity_bytes ? fmtBytes(o.capacity_bytes) + (o.device_free_bytes !== undefined &&
          o.device_free_bytes !== null ? ', ' + fmtBytes(o.device_free_bytes) + ' free' : '') : null],
        ['GPU', o.gpu ? (o.gpu.name || 'GPU ' + o.gpu.index) + ': ' + fmtBytes(o.gpu.used_bytes) +
          ' used of ' + fmtBytes(o.gpu.total_bytes) : o.gpu_unavailable],
        ['trend', o.trend ? fmtBytes(o.trend.slope_bytes_per_s) + '/s' +
          (o.trend.slope_bytes_per_iteration !== null && o.trend.slope_bytes_per_iteration !== undefined
            ? ', ' + fmtBytes(o.trend.slope_bytes_per_iteration) + ' per iteration' : '') +
          ' over ' + o.trend.samples + ' samples (r² ' + fmtNum(o.trend.r2, 3) + ')' : o.trend_unavailable],
        ['snapshot', o.snapshot_path ? snapshotLink(o.snapshot_path) : null],
      ]),
    ]);
    const owners = o.owners.slice().sort((a, b) => b.live_bytes - a.live_bytes);
    add(sec, [h('h3', null, 'Usage by owner'),
      table('owners', ['owner', 'live', 'peak live', 'budget', 'of budget'], owners.map((w) => [
        h('span', { class: 'owner', 'data-owner': w.owner }, swatch(colourOf(w.owner)), w.owner),
        fmtBytes(w.live_bytes), fmtBytes(w.peak_live_bytes),
        w.budget_bytes ? fmtBytes(w.budget_bytes) : 'none',
        usageBar(w.live_bytes, w.budget_bytes, colourOf(w.owner))]))]);
    if (o.kinds.length) {
      add(sec, [h('h3', null, 'Usage by kind'), table('kinds', ['kind', 'live'],
        o.kinds.map((k) => [h('span', null, swatch(kindColour(k.kind)), k.kind), fmtBytes(k.live_bytes)]))]);
    }
    if (o.gpu && o.gpu.processes && o.gpu.processes.length) {
      add(sec, [h('h3', null, 'Processes on the GPU'), table('processes', ['pid', 'name', 'used'],
        o.gpu.processes.map((p) => [p.pid, p.name, fmtBytes(p.used_bytes)]))]);
    }
    if (o.last_events.length) {
      // Folded: the diagnosis and the owners above say most; these are the evidence.
      add(sec, h('details', { class: 'events' },
        h('summary', null, 'Last events of the pool (' + o.last_events.length + ', latest last)'),
        h('div', { class: 'scroll' }, table('events', ['time', 'action', 'size', 'owner', 'kind', 'stream', 'address'],
          o.last_events.map((e) => [e.time_s ? fmtTime(e.time_s) : '–',
            h('span', { class: 'action ' + e.action.replace(/\s+/g, '-') }, e.action),
            fmtBytes(e.size_bytes), e.owner, e.kind, e.stream, e.address])))));
    }
    return sec;
  }

  // A link to the snapshot section read from the file the OOM report names.
  function snapshotLink(path) {
    const base = path.split('/').pop();
    const i = data.snapshots.findIndex((s) => s.input.split('/').pop() === base);
    return i < 0 ? h('span', null, h('code', null, path), ' (not among the inputs)')
      : h('a', { href: '#snapshot-' + i }, path);
  }

  /* ------------------------------------------------------------- series */

  // uPlot plugin: a vertical line at each alert (colour by level).
  function alertMarks(alerts) {
    return {
      hooks: {
        draw: [(u) => {
          const ctx = u.ctx;
          ctx.save();
          ctx.lineWidth = 1.5 * devicePixelRatio;
          ctx.setLineDash([4 * devicePixelRatio, 3 * devicePixelRatio]);
          for (const a of alerts) {
            if (a.at === null || a.at === undefined) continue;
            const x = Math.round(u.valToPos(a.at, 'x', true));
            if (x < u.bbox.left || x > u.bbox.left + u.bbox.width) continue;
            ctx.strokeStyle = levelColour[a.level] || '#555';
            ctx.beginPath();
            ctx.moveTo(x, u.bbox.top);
            ctx.lineTo(x, u.bbox.top + u.bbox.height);
            ctx.stroke();
          }
          ctx.restore();
        }],
      },
    };
  }

  const utc = (ts) => uPlot.tzDate(new Date(ts * 1e3), 'Etc/UTC');

  // Sections are drawn before they join the page: until then, the page's width.
  function chartWidth(box) {
    return Math.max(320, box.clientWidth || root.clientWidth || 900);
  }

  // One chart: lines = [{label, values, colour, dash, scale}]; scales 'bytes'
  // (left axis) and optionally 'ratio' (right axis, 0..1). The x axis is
  // time (UTC), or iterations where meta.byIteration.
  function chart(parent, meta, title, x, lines, alerts) {
    const box = h('div', { class: 'chart', 'data-chart': meta.kind, 'data-pool': meta.pool });
    parent.appendChild(box);
    const hasRatio = lines.some((l) => l.scale === 'ratio');
    const hasBytes = lines.some((l) => (l.scale || 'bytes') === 'bytes');
    const axes = [meta.byIteration ? {} : { values: timeTicks }];
    if (hasBytes) axes.push({ scale: 'bytes', size: 78, incrs: byteSteps, values: (u, vals) => vals.map(fmtTick) });
    if (hasRatio) axes.push({ scale: 'ratio', side: hasBytes ? 1 : 3, size: 50, grid: { show: !hasBytes },
      values: (u, vals) => vals.map((v) => v.toFixed(2)) });
    const opts = {
      title,
      width: chartWidth(box),
      height: 260,
      tzDate: utc,
      scales: {
        x: { time: !meta.byIteration },
        bytes: { range: (u, min, max) => [0, max > 0 ? max * 1.05 : 1] },
        ratio: { range: [0, 1] },
      },
      axes,
      series: [meta.byIteration ? { label: 'iteration', value: (u, v) => (v === null ? '–' : v) }
        : { label: 'time (UTC)', value: (u, v) => fmtTime(v) }].concat(lines.map((l) => ({
        label: l.label,
        stroke: l.colour,
        width: l.width || 2,
        dash: l.dash,
        scale: l.scale || 'bytes',
        points: { show: false },
        value: (u, v) => (l.scale === 'ratio' ? fmtNum(v, 3) : fmtBytes(v)),
      }))),
      plugins: [alertMarks(alerts)],
      legend: { live: true },
    };
    const u = new uPlot(opts, [x].concat(lines.map((l) => l.values)), box);
    drawn.charts.push({ section: meta.section, pool: meta.pool, kind: meta.kind,
      labels: lines.map((l) => l.label), colours: lines.map((l) => l.colour), points: x.length,
      plot: u, box });
    return u;
  }

  function seriesSection(s, i) {
    const sec = h('section', { class: 'series', id: 'series-' + i });
    const span = s.x.length ? s.x[s.x.length - 1] - s.x[0] : 0;
    const notes = [];
    if (s.downsampled) {
      notes.push(s.samples + ' samples, drawn as ' + s.points + ' (the fewest and the most live bytes of ' +
        'each interval are kept, so peaks show)');
    }
    if (s.restarts) notes.push('the monitor restarted ' + s.restarts + ' time' + (s.restarts === 1 ? '' : 's'));
    if (s.ignored_lines) notes.push(s.ignored_lines + ' lines of other types ignored');
    if (s.gpu_unavailable) notes.push('no GPU figures: ' + s.gpu_unavailable);
    // A soak samples once per iteration, often many times a second: there
    // the iteration is the better axis (it always increases; the clock's
    // milliseconds may not).
    const it = s.iteration;
    const distinct = new Set(s.x).size;
    const byIteration = it.length > 1 && it.every((v, k) => v !== null && (k === 0 || v > it[k - 1])) &&
      (span < 2 || distinct < 0.9 * s.x.length);
    const xs = byIteration ? it : s.x;
    if (byIteration) notes.push('drawn against the iteration: the samples are too close in time');
    add(sec, [
      h('h2', null, 'Samples from ', h('code', null, s.input)),
      h('p', { class: 'meta' }, s.samples + ' samples over ' + fmtDuration(span) + ', ' +
        fmtTime(s.x[0]) + ' to ' + fmtTime(s.x[s.x.length - 1]) + '.'),
      notes.map((n) => h('p', { class: 'note' }, n)),
    ]);
    const gpu = s.gpu;
    for (const p of s.pools) {
      const alerts = s.alerts.filter((a) => a.pool === null || a.pool === undefined || a.pool === p.pool)
        .map((a) => Object.assign({ at: byIteration ? a.iteration : a.x }, a));
      add(sec, h('h3', null, 'Pool ' + quoted(p.pool)));
      const meta = (kind) => ({ section: 'series-' + i, pool: p.pool, kind, byIteration });
      chart(sec, meta('owners'), 'Live bytes by owner', xs,
        p.owners.map((w) => ({ label: w.name, values: w.live_bytes, colour: colourOf(w.name) })), alerts);
      if (p.kinds.length) {
        chart(sec, meta('kinds'), 'Live bytes by kind', xs,
          p.kinds.map((k) => ({ label: k.name, values: k.live_bytes, colour: kindColour(k.name) })), alerts);
      }
      const pool = [{ label: 'live', values: p.live_bytes, colour: '#1f77b4' }];
      if (p.reserved_bytes) pool.push({ label: 'reserved', values: p.reserved_bytes, colour: '#555', dash: [6, 4] });
      if (p.pending_bytes) pool.push({ label: 'pending', values: p.pending_bytes, colour: '#9467bd', width: 1 });
      if (gpu && gpu.used_bytes) pool.push({ label: 'GPU used (all processes)', values: gpu.used_bytes, colour: '#d62728' });
      chart(sec, meta('pool'), 'Pool ' + quoted(p.pool) + ' and the device', xs, pool, alerts);
      if (p.fragmentation_ratio || p.largest_free_bytes) {
        const frag = [];
        if (p.fragmentation_ratio) frag.push({ label: 'fragmentation (1 − largest free / free)', values: p.fragmentation_ratio, colour: '#ff7f0e', scale: 'ratio' });
        if (p.largest_free_bytes) frag.push({ label: 'largest free block', values: p.largest_free_bytes, colour: '#2ca02c', width: 1.5 });
        chart(sec, meta('fragmentation'), 'Fragmentation', xs, frag, alerts);
      }
      const budgets = p.owners.filter((w) => w.budget_bytes > 0);
      if (budgets.length) {
        add(sec, table('owners', ['owner', 'budget', 'most live in the page', 'of budget'], budgets.map((w) => {
          const most = Math.max(0, ...w.live_bytes.filter((v) => v !== null));
          return [h('span', { class: 'owner', 'data-owner': w.name }, swatch(colourOf(w.name)), w.name),
            fmtBytes(w.budget_bytes), fmtBytes(most), usageBar(most, w.budget_bytes, colourOf(w.name))];
        })));
      }
    }
    add(sec, h('h3', null, 'Alerts (' + (s.alerts.length + s.alerts_dropped) + ')'));
    if (s.alerts.length) {
      add(sec, h('div', { class: 'scroll' }, table('alerts', ['time', 'level', 'alert', 'pool', 'owner', 'value', 'threshold', 'message'],
        s.alerts.map((a) => [fmtTime(a.x), h('span', { class: 'level ' + a.level, style: { color: levelColour[a.level] || 'inherit' } }, a.level),
          a.alert, a.pool, a.owner, fmtNum(a.value, 3), fmtNum(a.threshold, 3), a.message]))));
      if (s.alerts_dropped) add(sec, h('p', { class: 'note' }, s.alerts_dropped + ' more alerts not listed'));
    } else {
      add(sec, h('p', { class: 'meta' }, 'None.'));
    }
    return sec;
  }

  /* ---------------------------------------------------------- snapshots */

  const STATES = ['live', 'pending', 'free'];

  // The block map: the snapshot's memory in address order, wrapped in rows
  // of equal bytes; each block's area is its size. Blocks are coloured by
  // owner (pending ones pale, free ones grey); a black tick marks where the
  // addresses jump (unmapped space or another segment).
  function blockMap(s, i) {
    const b = s.blocks, n = b.offset.length;
    const W = 1000, ROW = 18, GAP = 4;
    let total = 0;
    for (let k = 0; k < n; k++) total += b.size[k];
    const rows = Math.max(1, Math.min(40, Math.ceil(Math.sqrt(n) / 1.5)));
    const perRow = total / rows || 1;
    const map = svg('svg', { class: 'blockmap', viewBox: '0 0 ' + W + ' ' + rows * (ROW + GAP),
      preserveAspectRatio: 'none', 'data-blocks': n, role: 'img' });
    const segStarts = new Set(s.segments.offset);
    let pos = 0, end = null;
    for (let k = 0; k < n; k++) {
      const owner = b.owner[k] >= 0 ? s.block_owners[b.owner[k]] : null;
      const state = STATES[b.state[k]];
      const fill = state === 'free' ? FREE : colourOf(owner);
      if (end !== null && (b.offset[k] !== end || segStarts.has(b.offset[k]))) {
        const r = Math.floor(pos / perRow);
        map.appendChild(svg('rect', { class: 'tick', x: ((pos - r * perRow) / perRow) * W - 0.75,
          y: r * (ROW + GAP) - 1, width: 1.5, height: ROW + 2 }));
      }
      // A block may run over the end of a row: one rect per row it covers.
      let a = pos;
      const z = pos + b.size[k];
      while (a < z) {
        const r = Math.min(rows - 1, Math.floor(a / perRow));
        const rowEnd = (r + 1) * perRow;
        const e = r === rows - 1 ? z : Math.min(z, rowEnd);
        const rect = svg('rect', { class: 'blk ' + state, x: ((a - r * perRow) / perRow) * W,
          y: r * (ROW + GAP), width: Math.max(0.4, ((e - a) / perRow) * W), height: ROW, fill,
          'data-block': k, 'data-state': state });
        if (owner !== null) rect.setAttribute('data-owner', owner);
        map.appendChild(rect);
        if (e >= z) break;
        a = e;
      }
      pos = z;
      end = b.offset[k] + b.size[k];
    }
    drawn.blockMaps.push({ section: 'snapshot-' + i, blocks: n, svg: map });
    return map;
  }

  function hexAdd(base, offset) {
    return '0x' + (BigInt(base) + BigInt(Math.round(offset))).toString(16);
  }

  function snapshotSection(s, i) {
    const sec = h('section', { class: 'snapshot', id: 'snapshot-' + i });
    const st = s.stats || {};
    add(sec, [
      h('h2', null, 'Snapshot of pool ' + quoted(s.pool)),
      h('p', { class: 'meta' }, 'From ', h('code', null, s.input), (s.policy ? ', policy ' + s.policy : '') +
        (s.backend ? ', backend ' + s.backend : '') + '.'),
      facts([
        ['live', fmtBytes(st.live_bytes)],
        ['reserved', fmtBytes(st.reserved_bytes)],
        ['pending', st.pending_bytes ? fmtBytes(st.pending_bytes) : null],
        ['largest free block', fmtBytes(st.largest_free_bytes) + ' of ' + fmtBytes(st.free_bytes) + ' free'],
        ['fragmentation', fmtNum(st.fragmentation_ratio, 3)],
        ['blocks', s.blocks_in_file + (s.blocks_drawn < s.blocks_in_file ? ' (drawn as ' + s.blocks_drawn +
          ': touching blocks of the same owner' + (s.merged === 'kind' ? ' and kind' : '') + ' merged)' : '')],
      ]),
    ]);
    const used = new Set(s.blocks.owner.filter((o) => o >= 0).map((o) => s.block_owners[o]));
    add(sec, h('div', { class: 'legend' },
      [...used].map((o) => h('span', { class: 'owner', 'data-owner': o }, swatch(colourOf(o)), o)),
      h('span', null, swatch(FREE), 'free'),
      h('span', null, h('span', { class: 'swatch pending-swatch' }), 'pending (pale)')));
    const wrap = h('div', { class: 'mapwrap' });
    const map = blockMap(s, i);
    const tip = h('div', { class: 'tip', hidden: true });
    wrap.appendChild(map);
    wrap.appendChild(tip);
    add(sec, wrap);
    map.addEventListener('mousemove', (ev) => {
      const k = ev.target.getAttribute && ev.target.getAttribute('data-block');
      if (k === null || k === undefined) { tip.hidden = true; return; }
      const b = s.blocks, j = Number(k);
      const lines = [
        hexAdd(s.base, b.offset[j]) + '  ' + fmtBytes(b.size[j]) + ' (' + b.size[j] + ' bytes)',
        STATES[b.state[j]] + (b.owner[j] >= 0 ? ', owner ' + quoted(s.block_owners[b.owner[j]]) : '') +
          (b.kind[j] >= 0 ? ', kind ' + s.block_kinds[b.kind[j]] : ''),
        b.state[j] === 0 ? 'requested ' + fmtBytes(b.requested[j]) : null,
        b.stream[j] >= 0 ? 'stream ' + s.streams[b.stream[j]] : null,
        b.count[j] > 1 ? b.count[j] + ' blocks merged' : null,
      ].filter((l) => l !== null);
      tip.textContent = lines.join('\n');
      tip.hidden = false;
      const box = wrap.getBoundingClientRect();
      tip.style.left = Math.min(ev.clientX - box.left + 12, box.width - 260) + 'px';
      tip.style.top = (ev.clientY - box.top + 14) + 'px';
    });
    map.addEventListener('mouseleave', () => { tip.hidden = true; });

    // Owners: the snapshot's own totals where it has them, else from the blocks.
    let owners = s.owners.map((w) => ({ name: w.name, live: w.live_bytes, peak: w.peak_live_bytes,
      blocks: w.live_blocks, budget: w.budget_bytes, failed: w.failed_allocs_total }));
    if (!owners.length) {
      const by = new Map();
      s.blocks.owner.forEach((o, k) => {
        if (o < 0 || s.blocks.state[k] !== 0) return;
        const e = by.get(o) || { name: s.block_owners[o], live: 0, blocks: 0 };
        e.live += s.blocks.requested[k];
        e.blocks += s.blocks.count[k];
        by.set(o, e);
      });
      owners = [...by.values()];
    }
    owners.sort((a, b) => (b.live || 0) - (a.live || 0));
    add(sec, [h('h3', null, 'Owners'), table('owners', ['owner', 'live', 'peak live', 'live blocks', 'budget', 'refused'],
      owners.map((w) => [h('span', { class: 'owner', 'data-owner': w.name }, swatch(colourOf(w.name)), w.name),
        fmtBytes(w.live), fmtBytes(w.peak), w.blocks === undefined ? '–' : w.blocks,
        w.budget ? fmtBytes(w.budget) : 'none', w.failed === undefined ? '–' : w.failed]))]);
    return sec;
  }

  /* --------------------------------------------------------------- main */

  // Each section is drawn on its own: one that fails says so and the others
  // still appear.
  function guarded(what, fn) {
    try {
      return fn();
    } catch (e) {
      drawn.errors.push(what + ': ' + e.message);
      console.error('vramkit report: ' + what + ': ' + (e.stack || e));
      return h('section', { class: 'failed' }, h('h2', null, what), h('p', null, 'Could not draw this part: ' + e.message));
    }
  }

  assignColours();
  root.appendChild(guarded('header', header));
  data.ooms.forEach((o, i) => root.appendChild(guarded('OOM report ' + o.input, () => oomSection(o, i))));
  data.series.forEach((s, i) => root.appendChild(guarded('series ' + s.input, () => seriesSection(s, i))));
  data.snapshots.forEach((s, i) => root.appendChild(guarded('snapshot ' + s.input, () => snapshotSection(s, i))));
  if (!data.inputs.length) root.appendChild(h('p', null, 'No inputs.'));

  // Charts follow the width of the page.
  let pending = 0;
  window.addEventListener('resize', () => {
    cancelAnimationFrame(pending);
    pending = requestAnimationFrame(() => {
      for (const c of drawn.charts) c.plot.setSize({ width: chartWidth(c.box), height: 260 });
    });
  });
  document.body.dataset.ready = '1';
})();
