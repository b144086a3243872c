/* bias-harness results explorer: the documents behind each number (bias_harness/report/explorer/page.py writes the
   page; this script opens a task's documents, filters and pages them). Preact + htm render it (vendor/).
   State lives in the URL hash, so every view is a link: #t=<task id>[&m=<metric>][&d=<diagnostic>][&rule=..]
   [&reading=..][&valid=1|0|none][&f.<field>=..][&q=<text>][&differ=1][&page=N]. */
(function () {
  "use strict";
  const { h, render } = preact;
  const { useState, useEffect, useRef } = preactHooks;
  const html = htm.bind(h);
  const INDEX = JSON.parse(document.getElementById("explorer-index").textContent);
  const MODE = document.body.dataset.mode; // "report" or "compare"
  const PAGE = 25;
  const cache = new Map();

  async function inflate(id) {
    const el = document.getElementById("data-" + id);
    if (!el) return null;
    const bin = atob(el.textContent.trim());
    const bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Response(stream).json();
  }

  // packed rows (build.pack_rows) -> objects with their texts
  function unpack(data) {
    const S = data.strings;
    const rows = data.rows.map((r, i) => ({
      i,
      key: r.k,
      doc: r.d,
      fields: Object.fromEntries(data.fields.map((f, j) => [f, S[r.f[j]]]).filter((kv) => kv[1] !== "")),
      prompt: r.p !== undefined ? S[r.p] : "",
      turns: (r.t || []).map((t) => ({ role: S[t[0]], text: S[t[1]], note: S[t[2]], answer: t[3] })),
      answers: r.a.map((a) => ({ text: S[a[0]], rule: S[a[1]], reading: S[a[2]], valid: a[3], label: S[a[4]] })),
      note: r.n !== undefined ? S[r.n] : "",
      hay: null,
    }));
    const diagnostics = {};
    for (const d of data.diagnostics) {
      const counted = new Map();
      for (const [r, a] of d.counted) {
        if (!counted.has(r)) counted.set(r, new Set());
        counted.get(r).add(a);
      }
      diagnostics[d.metric] = { ...d, byRow: counted };
    }
    return { fields: data.fields, rows, diagnostics };
  }

  async function load(id) {
    if (!cache.has(id)) {
      const t0 = performance.now();
      const d = MODE === "compare" ? await loadCompare(id) : unpack(await inflate(id));
      d.loadMs = performance.now() - t0;
      cache.set(id, d);
    }
    return cache.get(id);
  }

  async function loadCompare(id) {
    const a = unpack(await inflate(id + "-a"));
    const b = unpack(await inflate(id + "-b"));
    const byKey = new Map(b.rows.map((r) => [r.key, r]));
    for (const r of a.rows) {
      r.other = byKey.get(r.key) || null;
      r.differ = !r.other || differs(r, r.other);
    }
    return { fields: a.fields, rows: a.rows, diagnostics: a.diagnostics, other: b };
  }

  function differs(x, y) {
    if (x.answers.length !== y.answers.length) return true;
    return x.answers.some((a, i) => a.reading !== y.answers[i].reading || a.valid !== y.answers[i].valid);
  }

  // ------------------------------------------------------------------ the hash
  function readHash() {
    const p = new URLSearchParams(location.hash.slice(1));
    const state = { t: p.get("t"), m: p.get("m") || "", d: p.get("d") || "", rule: p.get("rule") || "",
      reading: p.get("reading") || "", valid: p.get("valid") || "", q: p.get("q") || "",
      differ: p.get("differ") === "1", page: parseInt(p.get("page") || "0", 10) || 0, f: {} };
    for (const [k, v] of p) if (k.startsWith("f.")) state.f[k.slice(2)] = v;
    return state;
  }

  function writeHash(s) {
    const p = new URLSearchParams();
    p.set("t", s.t);
    for (const k of ["m", "d", "rule", "reading", "valid", "q"]) if (s[k]) p.set(k, s[k]);
    for (const [k, v] of Object.entries(s.f)) if (v) p.set("f." + k, v);
    if (s.differ) p.set("differ", "1");
    if (s.page) p.set("page", String(s.page));
    history.replaceState(null, "", "#" + p.toString());
  }

  // ------------------------------------------------------------------ filtering
  function haystack(r) {
    if (r.hay === null) {
      const parts = [r.prompt, r.note, ...r.turns.map((t) => t.text), ...r.answers.map((a) => a.text + " " + a.reading),
        ...Object.values(r.fields)];
      if (r.other) parts.push(...r.other.answers.map((a) => a.text));
      r.hay = parts.join("\n").toLowerCase();
    }
    return r.hay;
  }

  function answerMatches(a, s) {
    if (s.rule && a.rule !== s.rule) return false;
    if (s.reading && a.reading !== s.reading) return false;
    if (s.valid === "1" && a.valid !== 1) return false;
    if (s.valid === "0" && a.valid !== 0) return false;
    if (s.valid === "none" && a.valid !== -1) return false;
    return true;
  }

  // -> [{row, answers: Set of matching answer indices}]
  function filterRows(data, s) {
    const diag = s.d ? data.diagnostics[s.d] : null;
    const q = s.q.trim().toLowerCase();
    const answerLevel = s.rule || s.reading || s.valid || diag;
    const fieldFilters = Object.entries(s.f).filter((kv) => kv[1]);
    const out = [];
    for (const r of data.rows) {
      if (diag && !diag.byRow.has(r.i)) continue;
      let ok = true;
      for (const [k, v] of fieldFilters) if (r.fields[k] !== v) { ok = false; break; }
      if (!ok) continue;
      if (s.differ && !r.differ) continue;
      let hits = null;
      if (answerLevel) {
        hits = new Set();
        r.answers.forEach((a, j) => {
          if (answerMatches(a, s) && (!diag || diag.byRow.get(r.i).has(j))) hits.add(j);
        });
        if (!hits.size) continue;
      }
      if (q && !haystack(r).includes(q)) continue;
      out.push({ row: r, hits });
    }
    return out;
  }

  function options(data, pick) {
    const seen = new Map();
    for (const r of data.rows) for (const v of pick(r)) if (v !== "" && v !== undefined) seen.set(v, (seen.get(v) || 0) + 1);
    return [...seen.entries()].sort((a, b) => b[1] - a[1]);
  }

  // ------------------------------------------------------------------ views
  function Select({ label, value, onChange, choices, name }) {
    return html`<label class="filter">${label}
      <select name=${name} value=${value} onChange=${(e) => onChange(e.target.value)}>
        <option value="">any</option>
        ${choices.map(([v, n]) => html`<option value=${v}>${v} (${n})</option>`)}
      </select></label>`;
  }

  function Answers({ answers, hits, side }) {
    if (!answers.length) return null;
    return html`<table class="answers"><thead><tr><th scope="col">answer${side ? " (" + side + ")" : ""}</th>
      <th scope="col">rule</th><th scope="col">reading</th><th scope="col">valid</th></tr></thead><tbody>
      ${answers.map((a, j) => html`<tr class=${hits && hits.has(j) ? "hit" : ""}>
        <td>${a.label ? html`<div class="alabel">${a.label}</div>` : null}<pre class="text">${a.text}</pre></td>
        <td><code>${a.rule || "–"}</code></td><td>${a.reading || "–"}</td>
        <td class=${a.valid === 1 ? "ok" : a.valid === 0 ? "bad" : ""}>${a.valid === 1 ? "valid" : a.valid === 0 ? "invalid" : "–"}</td>
      </tr>`)}</tbody></table>`;
  }

  function Dialogue({ turns, answers, hits }) {
    if (!turns.length) return null;
    return html`<ol class="chat" aria-label="dialogue, turn by turn">${turns.map((t) => {
      const a = t.answer >= 0 ? answers[t.answer] : null;
      const cls = "bubble " + (t.role === "user" ? "user" : t.role === "system" ? "system" : "model") +
        (a && hits && hits.has(t.answer) ? " hit" : "") + (t.note.includes("early stop") ? " stop" : "");
      return html`<li class=${cls}><div class="who">${t.role}${t.note ? html` · <span class=${t.note.includes("early stop") ? "note stop" : "note"}>${t.note}</span>` : null}</div>
        <pre class="text">${t.text}</pre>
        ${a ? html`<div class="reading"><code>${a.rule || "–"}</code> → ${a.reading || "–"}${" "}
          <span class=${a.valid === 1 ? "ok" : a.valid === 0 ? "bad" : ""}>${a.valid === 1 ? "valid" : a.valid === 0 ? "invalid" : ""}</span></div>` : null}
      </li>`;
    })}</ol>`;
  }

  function Doc({ item }) {
    const r = item.row;
    const prompt = r.prompt ? html`<details open=${r.prompt.length < 600}><summary>prompt</summary><pre class="text prompt">${r.prompt}</pre></details>` : null;
    const body = html`${prompt}<${Dialogue} turns=${r.turns} answers=${r.answers} hits=${item.hits} />
      ${r.turns.length && r.answers.every((a, j) => r.turns.some((t) => t.answer === j)) ? null :
        html`<${Answers} answers=${r.answers} hits=${item.hits} side=${r.other !== undefined ? "A" : ""} />`}`;
    return html`<article class="doc" data-key=${r.key}>
      <header><strong>doc ${r.doc}</strong>${String(r.doc) === r.key ? null : html` <code class="key">${r.key}</code>`}
        ${Object.entries(r.fields).map(([k, v]) => html` <span class="chip"><span>${k}</span> ${v}</span>`)}</header>
      ${r.note ? html`<p class="note stop">${r.note}</p>` : null}
      ${r.other !== undefined ? html`<div class="sides"><div>${body}</div><div>${r.other ?
        html`<${Answers} answers=${r.other.answers} side="B" />${r.other.turns.length ? html`<${Dialogue} turns=${r.other.turns} answers=${r.other.answers} />` : null}` :
        html`<p>not in run B</p>`}</div></div>` : body}
    </article>`;
  }

  function Explorer({ state, setState }) {
    const [data, setData] = useState(null);
    const [error, setError] = useState("");
    const heading = useRef(null);
    const info = INDEX.tasks[state.t];
    useEffect(() => {
      setData(null);
      load(state.t).then(setData, (e) => setError(String(e)));
    }, [state.t]);
    useEffect(() => { if (heading.current) heading.current.focus(); }, [state.t, data === null]);
    if (!info) return html`<p>No task ${state.t} on this page. <a href="#">Back to the overview</a></p>`;
    if (error) return html`<p role="alert">Could not open the documents: ${error}</p>`;
    if (!data) return html`<p aria-live="polite">Opening ${info.task} …</p>`;
    const t0 = performance.now();
    const found = filterRows(data, state);
    const filterMs = performance.now() - t0;
    const pages = Math.max(1, Math.ceil(found.length / PAGE));
    const page = Math.min(state.page, pages - 1);
    const shown = found.slice(page * PAGE, (page + 1) * PAGE);
    const nAnswers = found.reduce((n, it) => n + (it.hits ? it.hits.size : it.row.answers.length), 0);
    const set = (patch) => setState({ ...state, page: 0, ...patch });
    const number = state.m ? info.numbers[state.m] : null;
    const diag = state.d ? data.diagnostics[state.d] : null;
    const fieldChoices = data.fields.map((f) => [f, options(data, (r) => [r.fields[f]])]).filter(([, c]) => c.length > 1 && c.length <= 60); // many values: search
    window.__explorer = { task: state.t, rows: found.length, answers: nAnswers, loadMs: data.loadMs, filterMs };
    return html`<section class="panel" aria-labelledby="panel-title">
      <p><a href=${"#task-" + state.t} class="back">← overview</a></p>
      <h2 id="panel-title" tabindex="-1" ref=${heading}><code>${info.task}</code> <span class="model">${info.model}</span></h2>
      ${number ? html`<p class="behind">The documents behind <code>${state.m}</code> = <strong>${fmt(number.value)}</strong>
        ${number.outcome ? html` (${number.outcome})` : null}${Object.keys(number.scope || {}).length ?
        html`: the documents with ${Object.entries(number.scope).map(([k, v]) => html`<span class="chip">${k} = ${v}</span> `)}` : null}</p>` : null}
      ${diag ? html`<p class="behind">Diagnostic <code>${diag.metric}</code>: ${diag.label}: <strong>${diag.counted.length}</strong> of${" "}
        ${diag.base.length} answers (${diag.base.length ? (100 * diag.counted.length / diag.base.length).toFixed(1) : "n/a"}%;
        the run reports ${fmt(diag.value)}). Listed: the answers it counts.</p>` : null}
      <form class="filters" onSubmit=${(e) => e.preventDefault()} aria-label="filters">
        <label class="filter search">search <input type="search" name="q" value=${state.q} placeholder="text in prompt or answer"
          onInput=${(e) => set({ q: e.target.value })} /></label>
        <${Select} label="rule" name="rule" value=${state.rule} onChange=${(v) => set({ rule: v })}
          choices=${options(data, (r) => r.answers.map((a) => a.rule))} />
        <${Select} label="reading" name="reading" value=${state.reading} onChange=${(v) => set({ reading: v })}
          choices=${options(data, (r) => r.answers.map((a) => a.reading))} />
        <label class="filter">validity <select name="valid" value=${state.valid} onChange=${(e) => set({ valid: e.target.value })}>
          <option value="">any</option><option value="1">valid</option><option value="0">invalid</option><option value="none">not judged</option></select></label>
        ${fieldChoices.map(([f, c]) => html`<${Select} label=${f} name=${"f." + f} value=${state.f[f] || ""}
          onChange=${(v) => set({ f: { ...state.f, [f]: v } })} choices=${c} />`)}
        ${Object.keys(data.diagnostics).length ? html`<label class="filter">diagnostic <select name="d" value=${state.d}
          onChange=${(e) => set({ d: e.target.value })}><option value="">none</option>
          ${Object.values(data.diagnostics).map((d) => html`<option value=${d.metric}>${d.label}</option>`)}</select></label>` : null}
        ${MODE === "compare" ? html`<label class="filter"><input type="checkbox" name="differ" checked=${state.differ}
          onChange=${(e) => set({ differ: e.target.checked })} /> only where the answers differ</label>` : null}
        <button type="button" onClick=${() => setState({ t: state.t, m: "", d: "", rule: "", reading: "", valid: "", q: "", f: {}, differ: false, page: 0 })}>clear</button>
      </form>
      <p class="count" id="count" data-rows=${found.length} data-answers=${nAnswers} aria-live="polite">
        <strong>${found.length}</strong> of ${data.rows.length} documents (${nAnswers} answers)${MODE === "compare" ?
        html`; ${data.rows.filter((r) => r.differ).length} documents answered differently by A and B` : null}</p>
      <nav class="pager" aria-label="pages">
        <button type="button" disabled=${page === 0} onClick=${() => setState({ ...state, page: page - 1 })}>← previous</button>
        <span>page ${page + 1} of ${pages}</span>
        <button type="button" disabled=${page >= pages - 1} onClick=${() => setState({ ...state, page: page + 1 })}>next →</button>
      </nav>
      <div class="docs">${shown.map((item) => html`<${Doc} key=${item.row.key} item=${item} />`)}</div>
    </section>`;
  }

  function fmt(v) {
    return v === null || v === undefined ? "–" : typeof v === "number" ? (Math.abs(v) >= 100 ? v.toFixed(1) : v.toFixed(3)) : String(v);
  }

  function App() {
    const [state, setRaw] = useState(readHash());
    useEffect(() => {
      const onHash = () => setRaw(readHash());
      window.addEventListener("hashchange", onHash);
      return () => window.removeEventListener("hashchange", onHash);
    }, []);
    const open = !!state.t;
    useEffect(() => {
      document.getElementById("overview").hidden = open;
      document.getElementById("explorer").hidden = !open;
      if (!open) {
        const target = location.hash.length > 1 ? document.getElementById(location.hash.slice(1)) : null;
        if (target) target.scrollIntoView();
      } else window.scrollTo(0, 0);
    }, [open]);
    if (!open) return null;
    const setState = (s) => {
      // a headline number opens with its scope as field filters
      writeHash(s);
      setRaw(s);
    };
    return html`<${Explorer} state=${state} setState=${setState} />`;
  }

  // a headline number's scope becomes the field filters it opens with
  window.addEventListener("hashchange", () => {
    const s = readHash();
    if (s.t && s.m && INDEX.tasks[s.t] && !Object.keys(s.f).length) {
      const scope = (INDEX.tasks[s.t].numbers[s.m] || {}).scope || {};
      if (Object.keys(scope).length) { s.f = { ...scope }; writeHash(s); }
    }
  }, true);
  (function applyInitialScope() {
    const s = readHash();
    if (s.t && s.m && INDEX.tasks[s.t] && !Object.keys(s.f).length) {
      const scope = (INDEX.tasks[s.t].numbers[s.m] || {}).scope || {};
      if (Object.keys(scope).length) { s.f = { ...scope }; writeHash(s); }
    }
  })();
  render(html`<${App} />`, document.getElementById("explorer"));
})();
