// dtrain dashboard: polls the server's JSON (src/cli/dashboard/Server.h) and draws
// each run's metrics with uPlot. Runs are read incrementally: each poll asks for
// the metrics file's lines after the last complete one it has.
"use strict";

const POLL_MS = 2000;
const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"];
const runs = new Map();  // name -> {info, records, next, result, shown}
const charts = new Map();  // chart id -> {plot, key}
let polls = 0;

// Axes whose labels fit large values (samples/s, bytes): 12k, 3.4M.
const compact = new Intl.NumberFormat("en", {notation: "compact", maximumSignificantDigits: 3});
const AXES = [{values: (u, ticks) => ticks.map(v => compact.format(v))},
              {size: 55, values: (u, ticks) => ticks.map(v => compact.format(v))}];

// The charts, each one value of the records against the chosen x axis.
const CHARTS = [
  {id: "loss", title: "training loss", value: r => r.loss},
  {id: "test_accuracy", title: "test accuracy", value: r => r.test_accuracy},
  {id: "eval_loss", title: "test / validation loss", value: r => r.val_loss ?? r.test_loss},
  {id: "samples_per_s", title: "samples/s", value: r => r.samples_per_s},
  {id: "lr", title: "learning rate", value: r => r.lr},
];

// The summary table's columns after name and state: [field, value of the run].
const COLUMNS = [
  ["step", run => last(run.records, r => r.step)],
  ["loss", run => last(run.records, r => r.loss)],
  ["test_accuracy", run => last(run.records, r => r.test_accuracy)],
  ["eval_loss", run => last(run.records, r => r.val_loss ?? r.test_loss)],
  ["samples_per_s", run => run.result?.samples_per_s ?? last(run.records, r => r.samples_per_s)],
  // dtrain simulate's prediction for the run, on its result line with --machine.
  ["predicted_samples_per_s", run => run.result?.predicted_samples_per_s],
  ["lr", run => last(run.records, r => r.lr)],
  ["time_s", run => last(run.records, r => r.time_s)],
  ["straggler", run => straggler(run.result)],
];

function last(records, get) {
  for (let i = records.length - 1; i >= 0; --i) {
    const v = get(records[i]);
    if (v !== undefined && v !== null) return v;
  }
  return undefined;
}

function straggler(result) {
  const s = result?.straggler;
  if (!s) return result ? "none" : undefined;
  return `rank ${s.rank} (${s.host}) +${(100 * s.share_of_step).toFixed(0)}%`;
}

function format(v) {
  if (v === undefined) return "–";
  if (typeof v !== "number") return String(v);
  if (Number.isInteger(v)) return String(v);
  return Math.abs(v) >= 1000 ? v.toFixed(0) : v.toPrecision(4);
}

async function getJson(url) {
  const res = await fetch(url, {cache: "no-store"});
  if (!res.ok) throw new Error(`${url}: ${res.status}`);
  return res.json();
}

// The x of record r on the chosen axis; records without it (an evaluation has no
// bytes count) take the last training record's at or before its step.
function xOf(run, r, axis) {
  if (r[axis] !== undefined) return r[axis];
  let x;
  for (const t of run.records) {
    if (t.step > r.step) break;
    if (t[axis] !== undefined) x = t[axis];
  }
  return x;
}

async function pollRun(name, info) {
  let run = runs.get(name);
  if (!run) {
    run = {info, records: [], next: 0, result: null, shown: true};
    runs.set(name, run);
  }
  run.info = info;
  const base = `/api/run/${encodeURIComponent(name)}`;
  const chunk = await getJson(`${base}/metrics?since=${run.next}`);
  if (chunk.next < run.next) run.records = [];  // the file was rewritten by a new run
  run.records.push(...chunk.records.filter(r => r.step !== undefined));
  run.next = chunk.next;
  if (info.finished && !run.result) run.result = await getJson(`${base}/result`);
  if (!info.finished) run.result = null;
}

async function poll() {
  try {
    const list = await getJson("/api/runs");
    await Promise.all(list.map(info => pollRun(info.name, info)));
    for (const name of [...runs.keys()])
      if (!list.some(i => i.name === name)) runs.delete(name);
    ++polls;
    render();
    document.getElementById("status").textContent =
        `${list.length} run${list.length === 1 ? "" : "s"}, updated ${new Date().toLocaleTimeString()}`;
    document.body.dataset.polls = polls;
  } catch (e) {
    document.getElementById("status").textContent = `cannot reach dtrain dashboard (${e.message})`;
  }
  setTimeout(poll, POLL_MS);
}

function renderTable() {
  const body = document.querySelector("#runs tbody");
  body.replaceChildren();
  for (const [name, run] of runs) {
    const tr = document.createElement("tr");
    tr.dataset.run = name;
    const show = document.createElement("input");
    show.type = "checkbox";
    show.checked = run.shown;
    show.onchange = () => { run.shown = show.checked; render(); };
    cell(tr).append(show);
    cell(tr, "name").textContent = name;
    const state = cell(tr, "state");
    state.textContent = run.info.finished ? "finished" : "running";
    state.className = state.textContent;
    for (const [field, get] of COLUMNS) {
      const td = cell(tr, field);
      const v = get(run);
      td.textContent = format(v);
      if (v !== undefined) td.dataset.value = String(v);
    }
    files(cell(tr, "files"), name, run.info);
    body.append(tr);
  }
}

function cell(tr, field) {
  const td = document.createElement("td");
  if (field) td.dataset.field = field;
  tr.append(td);
  return td;
}

function files(td, name, info) {
  const base = `/api/run/${encodeURIComponent(name)}`;
  const links = [["config", info.has_config, "config"], ["timeline", info.has_timeline, "timeline.json"],
                 ["machine", info.has_machine, "machine.json"]];
  for (const [label, has, path] of links) {
    if (!has) continue;
    const a = document.createElement("a");
    a.href = `${base}/${path}`;
    a.textContent = label;
    if (label === "timeline") a.download = `${name}-timeline.json`;
    td.append(a, " ");
  }
}

// One chart: the value of every shown run against the axis, aligned by uPlot.join.
function renderChart(spec, axis) {
  const shown = [...runs].filter(([, run]) => run.shown);
  const tables = [];
  const names = [];
  for (const [name, run] of shown) {
    const pts = run.records
        .map(r => [xOf(run, r, axis), spec.value(r)])
        .filter(([x, y]) => typeof x === "number" && typeof y === "number")
        .sort((a, b) => a[0] - b[0]);
    if (!pts.length) continue;
    tables.push([pts.map(p => p[0]), pts.map(p => p[1])]);
    names.push(name);
  }
  const id = `chart-${spec.id}`;
  let box = document.getElementById(id);
  if (!tables.length) {
    if (box) box.remove();
    charts.delete(spec.id);
    return;
  }
  const data = tables.length === 1 ? tables[0] : uPlot.join(tables);
  const key = axis + "|" + names.join("|");
  const known = charts.get(spec.id);
  if (known && known.key === key) {
    known.plot.setData(data);
    return;
  }
  if (known) known.plot.destroy();
  if (!box) {
    box = document.createElement("div");
    box.id = id;
    box.className = "chart";
    box.dataset.chart = spec.id;
    document.getElementById("charts").append(box);
  }
  box.replaceChildren();
  const h = document.createElement("h3");
  h.textContent = spec.title;
  box.append(h);
  const series = [{label: axis}].concat(names.map((n, i) => ({
    label: n, stroke: COLORS[i % COLORS.length], width: 1.5, spanGaps: true,
    points: {show: data[0].length < 40}})));
  const plot = new uPlot({width: 420, height: 240, scales: {x: {time: false}}, series, axes: AXES},
                         data, box);
  charts.set(spec.id, {plot, key});
}

// Per logged window of one run: compute, exposed communication and data wait in ms
// per step, stacked (the strategies report running means; a window's own mean is
// the difference of the running sums).
function phaseWindows(run) {
  const out = {x: [], compute: [], exposed: [], data: []};
  let prev = {step: 0, compute_ms: 0, exposed_comm_ms: 0, data_wait_s: 0};
  for (const r of run.records) {
    if (r.loss === undefined || r.compute_ms === undefined) continue;
    if (r.step > prev.step) {
      const n = r.step - prev.step;
      // Clamped: a resumed run's running means start at its first step, not at 0.
      const mean = f => Math.max(0, (r[f] * r.step - prev[f] * prev.step) / n);
      out.x.push(r.step);
      out.compute.push(mean("compute_ms"));
      out.exposed.push(mean("exposed_comm_ms"));
      out.data.push(1000 * ((r.data_wait_s ?? 0) - (prev.data_wait_s ?? 0)) / n);
    }
    prev = r;
  }
  return out;
}

function renderPhases() {
  const box = document.getElementById("phases");
  box.replaceChildren();
  for (const [name, run] of runs) {
    if (!run.shown) continue;
    const w = phaseWindows(run);
    if (!w.x.length) continue;
    const div = document.createElement("div");
    div.className = "chart";
    div.dataset.phases = name;
    const h = document.createElement("h3");
    h.textContent = name;
    div.append(h);
    box.append(div);
    // Stacked: each series is the sum of those below it, filled down to zero and
    // drawn highest first, so each band shows its own phase.
    const compute = w.compute;
    const exposed = w.exposed.map((v, i) => v + compute[i]);
    const data = w.data.map((v, i) => v + exposed[i]);
    const layers = [["+ data wait", "#2ca02c", data], ["+ exposed comm", "#d62728", exposed],
                    ["compute", "#1f77b4", compute]];
    const series = [{label: "step"}].concat(layers.map(([label, color]) => ({
      label, stroke: color, fill: color + "66", width: 1})));
    new uPlot({width: 420, height: 200, scales: {x: {time: false}}, series, axes: AXES},
              [w.x, ...layers.map(l => l[2])], div);
  }
  document.getElementById("phases-section").hidden = !box.children.length;
}

// Each rank's work and wait of the last logged window as a horizontal bar: the
// slow rank has the longest work and no wait; the others wait for it.
function renderRanks() {
  const box = document.getElementById("ranks");
  box.replaceChildren();
  for (const [name, run] of runs) {
    const rec = run.shown ? [...run.records].reverse().find(r => r.rank_work_ms) : undefined;
    if (!rec) continue;
    const div = document.createElement("div");
    div.className = "chart ranks";
    div.dataset.ranks = name;
    const h = document.createElement("h3");
    h.textContent = `${name}, step ${rec.step}`;
    div.append(h);
    const longest = Math.max(...rec.rank_work_ms.map((w, i) => w + rec.rank_wait_ms[i]), 1e-9);
    rec.rank_work_ms.forEach((work, rank) => {
      const wait = rec.rank_wait_ms[rank];
      const row = document.createElement("div");
      row.className = "rank-row";
      row.dataset.rank = rank;
      row.dataset.workMs = String(work);
      row.dataset.waitMs = String(wait);
      const label = document.createElement("span");
      label.textContent = `rank ${rank}`;
      const bar = document.createElement("span");
      bar.className = "bar";
      for (const [cls, v] of [["work", work], ["wait", wait]]) {
        const seg = document.createElement("span");
        seg.className = cls;
        seg.style.width = `${(100 * v / longest).toFixed(2)}%`;
        bar.append(seg);
      }
      const text = document.createElement("span");
      text.textContent = `${format(work)} + ${format(wait)}`;
      row.append(label, bar, text);
      div.append(row);
    });
    box.append(div);
  }
  document.getElementById("ranks-section").hidden = !box.children.length;
}

function render() {
  renderTable();
  renderRanks();
  const axis = document.getElementById("x-axis").value;
  for (const spec of CHARTS) renderChart(spec, axis);
  renderPhases();
}

document.getElementById("x-axis").onchange = render;
poll();
