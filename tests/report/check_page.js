#!/usr/bin/env node
/* tests/report/check_page.js PAGE.html EXPECT.json [--screenshot OUT.png]
 *
 * Opens a page `vramkit report` wrote in headless Chromium (Debian's
 * chromium, driven by playwright-core from tests/report/node_modules) with
 * every request that is not the file itself refused, and checks what it drew
 * against EXPECT.json (made by tests/cli/test_report.sh from the inputs):
 *  - no console error or warning, no page error, no request leaves the file;
 *  - each series section has, per pool, an owners chart whose legend names
 *    exactly the expected owners in order, with each owner's line drawn in
 *    its colour (pixels of that colour on the canvas), a kinds chart, a pool
 *    chart and a fragmentation chart, each with the expected points;
 *  - each snapshot's block map has the expected blocks (live, pending, free
 *    per owner), each filled with its owner's colour, the same colour as the
 *    owner's line in the charts and its swatch in the legend;
 *  - each OOM report shows its diagnosis line and cause;
 *  - an owner named with markup shows as text: no element made, no script run.
 * With --screenshot, also writes a PNG of the whole page.
 * Prints one line per check group; exits 1 on the first failures. */
'use strict';
const path = require('path');
const fs = require('fs');

const args = process.argv.slice(2);
const shotAt = args.indexOf('--screenshot');
const shot = shotAt >= 0 ? args.splice(shotAt, 2)[1] : null;
if (args.length !== 2 || (shotAt >= 0 && !shot)) {
  console.error('usage: check_page.js PAGE.html EXPECT.json [--screenshot OUT.png]');
  process.exit(2);
}
const page = path.resolve(args[0]);
const expect = JSON.parse(fs.readFileSync(args[1], 'utf8'));
const { chromium } = require(path.join(__dirname, 'node_modules', 'playwright-core'));

const failures = [];
function check(ok, what) {
  if (!ok) failures.push(what);
  return ok;
}
function same(a, b) {
  return JSON.stringify(a) === JSON.stringify(b);
}

(async () => {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    // The test may run as root (CI containers), where Chromium needs this.
    args: ['--no-sandbox', '--disable-gpu'],
  });
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, deviceScaleFactor: 1 });
  const tab = await context.newPage();
  const messages = [];
  const outside = [];
  tab.on('console', (m) => {
    if (m.type() === 'error' || m.type() === 'warning') messages.push(m.type() + ': ' + m.text());
  });
  tab.on('pageerror', (e) => messages.push('page error: ' + e.message));
  await tab.route('**/*', (route) => {
    const url = route.request().url();
    if (url.startsWith('file:')) return route.continue();
    outside.push(url);
    return route.abort();
  });
  await tab.goto('file://' + page);
  await tab.waitForSelector('body[data-ready="1"]', { timeout: 20000 });
  // What the page itself said; the checks' own reading of the canvases
  // below may make Chromium advise on readback speed.
  const pageMessages = messages.slice();

  // Everything the checks need, read in the page.
  const got = await tab.evaluate(() => {
    // Any CSS colour as [r, g, b].
    const probe = document.createElement('span');
    document.body.appendChild(probe);
    function rgb(css) {
      probe.style.color = '';
      probe.style.color = css;
      const m = getComputedStyle(probe).color.match(/\d+(\.\d+)?/g).map(Number);
      return m.slice(0, 3);
    }
    // Pixels of the canvas within a small distance of each colour (the
    // canvas read once).
    function pixels(canvas, colours) {
      const d = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
      return colours.map((c) => count(d, c));
    }
    function count(d, colour) {
      const [r, g, b] = rgb(colour);
      let n = 0;
      for (let i = 0; i < d.length; i += 4) {
        if (d[i + 3] > 200 && Math.abs(d[i] - r) + Math.abs(d[i + 1] - g) + Math.abs(d[i + 2] - b) < 24) n++;
      }
      return n;
    }
    const R = window.vramReport;
    return {
      title: document.title,
      errors: R.errors,
      pwned: window.__pwned === undefined ? null : window.__pwned,
      images: document.querySelectorAll('img, iframe, object, embed').length,
      ownerColours: R.ownerColours,
      ownerColoursRgb: Object.fromEntries(Object.entries(R.ownerColours).map(([k, v]) => [k, rgb(v)])),
      charts: R.charts.map((c) => ({
        section: c.section,
        pool: c.pool,
        kind: c.kind,
        points: c.points,
        legend: [...c.box.querySelectorAll('.u-legend .u-series .u-label')].map((e) => e.textContent).slice(1),
        labels: c.labels,
        colours: c.colours,
        drawn: pixels(c.box.querySelector('canvas'), c.colours),
        lengths: c.plot.data.slice(1).map((a) => a.length),
      })),
      maps: R.blockMaps.map((m) => {
        const rects = [...m.svg.querySelectorAll('rect.blk')];
        const blocks = new Map();
        for (const r of rects) {
          const k = r.getAttribute('data-block');
          const prev = blocks.get(k);
          const cur = { owner: r.getAttribute('data-owner'), state: r.getAttribute('data-state'),
            fill: rgb(r.getAttribute('fill')) };
          if (prev && JSON.stringify(prev) !== JSON.stringify(cur)) cur.inconsistent = true;
          blocks.set(k, cur);
        }
        const sec = document.getElementById(m.section);
        return {
          section: m.section,
          blocks: [...blocks.values()],
          legend: Object.fromEntries([...sec.querySelectorAll('.legend .owner')].map((e) =>
            [e.getAttribute('data-owner'), rgb(getComputedStyle(e.querySelector('.swatch')).backgroundColor)])),
          legendText: [...sec.querySelectorAll('.legend .owner')].map((e) => e.textContent),
          tableOwners: [...sec.querySelectorAll('table.owners td:first-child')].map((e) => e.textContent),
        };
      }),
      ooms: [...document.querySelectorAll('section.oom')].map((s) => ({
        diagnosis: s.querySelector('.diagnosis').textContent,
        cause: s.querySelector('.diagnosis').getAttribute('data-cause'),
        owners: [...s.querySelectorAll('table.owners td:first-child')].map((e) => e.textContent),
        events: s.querySelectorAll('table.events tbody tr').length,
        snapshotLink: (s.querySelector('a[href^="#snapshot-"]') || {}).textContent || null,
      })),
      alertRows: [...document.querySelectorAll('section.series')].map((s) =>
        s.querySelectorAll('table.alerts tbody tr').length),
    };
  });

  // ---- the page as a whole
  check(pageMessages.length === 0, 'console or page errors: ' + pageMessages.join(' | '));
  check(outside.length === 0, 'requests outside the file: ' + outside.join(', '));
  check(got.errors.length === 0, 'sections that failed to draw: ' + got.errors.join(' | '));
  check(got.title === expect.title, `title "${got.title}", expected "${expect.title}"`);
  check(got.pwned === null && got.images === 0, 'markup in an owner name was run or made elements');
  console.log(`page: loaded without errors, ${got.charts.length} charts, ${got.maps.length} block maps, ` +
    `${got.ooms.length} OOM reports, no request outside the file`);

  // ---- series: legends, colours, lines drawn, points
  expect.series.forEach((es, i) => {
    const section = 'series-' + i;
    for (const ep of es.pools) {
      const charts = got.charts.filter((c) => c.section === section && c.pool === ep.pool);
      const kinds = charts.map((c) => c.kind);
      check(same(kinds, ['owners', 'kinds', 'pool', 'fragmentation']),
        `${section} pool ${ep.pool}: charts ${kinds}, expected owners,kinds,pool,fragmentation`);
      const owners = charts.find((c) => c.kind === 'owners');
      if (!owners) continue;
      check(same(owners.legend, ep.owners), `${section}: owners legend ${JSON.stringify(owners.legend)}, ` +
        `expected ${JSON.stringify(ep.owners)}`);
      owners.labels.forEach((l, k) => {
        check(owners.colours[k] === got.ownerColours[l], `${section}: owner ${l} drawn in ${owners.colours[k]}, ` +
          `its colour is ${got.ownerColours[l]}`);
        check(owners.drawn[k] > 20, `${section}: owner ${l}'s line has ${owners.drawn[k]} pixels of its colour`);
      });
      const kc = charts.find((c) => c.kind === 'kinds');
      if (kc) check(same(kc.legend, ep.kinds), `${section}: kinds legend ${kc.legend}, expected ${ep.kinds}`);
      for (const c of charts) {
        check(c.points === es.points && c.lengths.every((n) => n === es.points),
          `${section} ${c.kind}: ${c.points} points (${c.lengths}), expected ${es.points}`);
      }
      console.log(`${section} (${es.input}): pool ${ep.pool}: owners ${JSON.stringify(owners.legend)} drawn ` +
        `(${owners.drawn.join(', ')} pixels of their colours), ${es.points} points`);
    }
    check(got.alertRows[i] === es.alerts, `${section}: ${got.alertRows[i]} alert rows, expected ${es.alerts}`);
  });

  // ---- snapshots: the block map
  expect.snapshots.forEach((es, i) => {
    const m = got.maps.find((x) => x.section === 'snapshot-' + i);
    if (!check(m, `snapshot-${i}: no block map`)) return;
    check(m.blocks.length === es.blocks, `snapshot-${i}: ${m.blocks.length} blocks drawn, expected ${es.blocks}`);
    check(!m.blocks.some((b) => b.inconsistent), `snapshot-${i}: a block's pieces differ`);
    const count = {};
    for (const b of m.blocks) {
      const key = b.state === 'free' ? 'free' : b.state + ':' + b.owner;
      count[key] = (count[key] || 0) + 1;
      if (b.state !== 'free') {
        check(same(b.fill, got.ownerColoursRgb[b.owner]), `snapshot-${i}: a block of ${b.owner} filled ` +
          `${b.fill}, its colour is ${got.ownerColoursRgb[b.owner]}`);
        check(same(m.legend[b.owner], got.ownerColoursRgb[b.owner]), `snapshot-${i}: legend swatch of ` +
          `${b.owner} is ${m.legend[b.owner]}`);
      }
    }
    check(same(Object.keys(count).sort(), Object.keys(es.by).sort()) &&
      Object.keys(es.by).every((k) => count[k] === es.by[k]),
    `snapshot-${i}: blocks by state and owner ${JSON.stringify(count)}, expected ${JSON.stringify(es.by)}`);
    check(m.legendText.includes(expect.hostile), `snapshot-${i}: the owner named with markup is not in the legend as text`);
    console.log(`snapshot-${i}: ${m.blocks.length} blocks drawn, by state and owner ${JSON.stringify(count)}, ` +
      'each in its owner\'s colour');
  });

  // ---- OOM reports
  expect.ooms.forEach((eo, i) => {
    const o = got.ooms[i];
    if (!check(o, `oom-${i}: missing`)) return;
    check(o.diagnosis.includes(eo.line), `oom-${i}: diagnosis "${o.diagnosis}" lacks "${eo.line}"`);
    check(o.cause === eo.cause, `oom-${i}: cause ${o.cause}, expected ${eo.cause}`);
    check(same(o.owners.slice().sort(), eo.owners.slice().sort()), `oom-${i}: owners ${o.owners}, expected ${eo.owners}`);
    check(o.events === eo.events, `oom-${i}: ${o.events} events, expected ${eo.events}`);
    if (eo.snapshot_link) check(o.snapshotLink === eo.snapshot_link, `oom-${i}: snapshot link ${o.snapshotLink}`);
    console.log(`oom-${i}: diagnosis (${o.cause}) shown, ${o.owners.length} owners, ${o.events} events`);
  });

  if (shot) {
    await tab.screenshot({ path: shot, fullPage: true });
    console.log('screenshot: ' + shot);
  }
  await browser.close();
  if (failures.length) {
    console.error('FAIL:\n  ' + failures.slice(0, 30).join('\n  '));
    process.exit(1);
  }
  console.log('page checks passed');
})().catch((e) => {
  console.error('check_page: ' + (e.stack || e));
  process.exit(1);
});
