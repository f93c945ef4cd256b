// uttera playground: streams speech over HTTP or the WebSocket and plays it while it arrives.
// PCM goes through the Web Audio API (each chunk scheduled right after the previous one); other formats
// through an <audio> element on GET /v1/audio/speech. No build step: a plain ES module.

const $ = (id) => document.getElementById(id);
const CONTEXT_ID = "playground";
const LEAD_S = 0.05; // scheduling margin for the first chunk: a buffer started in the past would be cut
const BROWSER_FORMATS = new Set(["pcm", "mp3", "opus", "aac", "flac", "wav"]); // mulaw is for telephony

let audioCtx = null;
let analyser = null;
let mediaSource = null; // the <audio> element routed into the analyser, made once
let run = null; // the current run: {player, ws, abort, started, ...}

// --- audio ------------------------------------------------------------------------------------------

function audio() {
  if (audioCtx === null) {
    audioCtx = new AudioContext();
    analyser = audioCtx.createAnalyser();
    analyser.fftSize = 2048;
    analyser.connect(audioCtx.destination);
  }
  return audioCtx;
}

/** RMS of what is playing now, from the analyser (0 when silent). */
function level() {
  if (analyser === null) return 0;
  const buf = new Float32Array(analyser.fftSize);
  analyser.getFloatTimeDomainData(buf);
  let sum = 0;
  for (const x of buf) sum += x * x;
  return Math.sqrt(sum / buf.length);
}

/** Schedules int16 PCM chunks back to back on the AudioContext's clock. */
class PcmPlayer {
  constructor(rate) {
    this.ctx = audio();
    this.rate = rate;
    this.next = 0; // AudioContext time at which the next chunk starts
    this.startAt = null; // AudioContext time of the first sample
    this.samples = 0;
    this.odd = null; // a byte left over when a network chunk split a sample
    this.sources = new Set();
  }

  push(bytes) {
    if (this.odd !== null) {
      const joined = new Uint8Array(bytes.length + 1);
      joined[0] = this.odd;
      joined.set(bytes, 1);
      bytes = joined;
      this.odd = null;
    }
    if (bytes.length % 2) {
      this.odd = bytes[bytes.length - 1];
      bytes = bytes.subarray(0, bytes.length - 1);
    }
    const n = bytes.length / 2;
    if (n === 0) return;
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
    const buffer = this.ctx.createBuffer(1, n, this.rate);
    const out = buffer.getChannelData(0);
    for (let i = 0; i < n; i++) out[i] = view.getInt16(2 * i, true) / 32768;
    const source = this.ctx.createBufferSource();
    source.buffer = buffer;
    source.connect(analyser);
    const at = Math.max(this.next, this.ctx.currentTime + LEAD_S);
    if (this.startAt === null) this.startAt = at;
    source.start(at);
    this.next = at + n / this.rate;
    this.samples += n;
    this.sources.add(source);
    source.onended = () => this.sources.delete(source);
  }

  /** ms of audio played so far (negative before the first sample). */
  playedMs() {
    return this.startAt === null ? -1 : 1000 * (this.ctx.currentTime - this.startAt);
  }

  get started() { return this.startAt !== null && this.ctx.currentTime >= this.startAt; }
  get playing() { return this.sources.size > 0; }
  get audioSeconds() { return this.samples / this.rate; }

  stop() {
    for (const s of this.sources) s.stop();
    this.sources.clear();
  }
}

/** Plays a compressed format through the <audio> element (progressive download of GET). */
class ElementPlayer {
  constructor(url) {
    this.el = $("player");
    const ctx = audio();
    if (mediaSource === null) {
      mediaSource = ctx.createMediaElementSource(this.el);
      mediaSource.connect(analyser);
    }
    this.el.src = url;
    this.el.play().catch((e) => { if (e.name !== "AbortError") status(`cannot play: ${e.message}`); });
  }
  playedMs() { return this.el.currentTime > 0 ? 1000 * this.el.currentTime : -1; }
  get started() { return this.el.currentTime > 0; }
  get playing() { return !this.el.paused && !this.el.ended; }
  get audioSeconds() { return this.el.duration || this.el.currentTime; }
  stop() {
    this.el.pause();
    this.el.removeAttribute("src");
    this.el.load();
  }
}

// --- words ------------------------------------------------------------------------------------------

/** Renders `text` with the timed words as spans (untimed text stays plain). */
function renderWords(text, words) {
  const box = $("words");
  box.textContent = "";
  let at = 0;
  for (const w of words) {
    if (w.char_start > at) box.append(text.slice(at, w.char_start));
    const span = document.createElement("span");
    span.className = "w";
    span.textContent = text.slice(w.char_start, w.char_end);
    span.dataset.start = w.start_ms;
    span.dataset.end = w.end_ms;
    box.append(span);
    at = w.char_end;
  }
  if (at < text.length) {  // not timed yet: still to be synthesized
    const tail = document.createElement("span");
    tail.className = "pending";
    tail.textContent = text.slice(at);
    box.append(tail);
  }
}

function highlight(ms) {
  for (const span of $("words").querySelectorAll("span.w")) {
    const start = Number(span.dataset.start), end = Number(span.dataset.end);
    span.classList.toggle("spoken", ms >= start);
    span.classList.toggle("current", ms >= start && ms < Math.max(end, start + 1));
  }
}

// --- runs -------------------------------------------------------------------------------------------

function status(text) { $("status").textContent = text; }

function settings() {
  return {
    text: $("text").value,
    voice: $("voice").value || "default",
    speed: Number($("speed").value),
    format: $("format").value || "pcm",
    transport: $("transport").value,
    llm: $("llm").checked,
  };
}

function newRun() {
  stop(false);
  const r = { clicked: performance.now(), firstAudioMs: null, finished: null, player: null, ws: null,
              abort: new AbortController(), text: "", words: [], peak: 0, done: false };
  run = r;
  $("ttfa").textContent = "–";
  $("rtf").textContent = "–";
  $("audio-s").textContent = "–";
  $("stop").disabled = false;
  return r;
}

async function speak() {
  const s = settings();
  if (!s.text.trim()) { status("type some text first"); return; }
  const r = newRun();
  await audio().resume();
  status("speaking…");
  try {
    if (s.transport === "ws") await speakWebSocket(r, s);
    else if (s.format === "pcm") await speakHttpPcm(r, s);
    else speakElement(r, s);
  } catch (e) {
    if (e.name !== "AbortError" && run === r) { status(`error: ${e.message}`); console.warn(e); }
  }
}

async function speakHttpPcm(r, s) {
  r.text = s.text;
  renderWords(s.text, []);
  const response = await fetch("/v1/audio/speech", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "uttera", input: s.text, voice: s.voice, speed: s.speed, response_format: "pcm" }),
    signal: r.abort.signal,
  });
  if (!response.ok) throw new Error((await response.json()).error.message);
  r.player = new PcmPlayer(Number(response.headers.get("x-sample-rate")));
  const reader = response.body.getReader();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    r.player.push(value);
  }
  finished(r);
}

function speakElement(r, s) {
  r.text = s.text;
  renderWords(s.text, []);
  const q = new URLSearchParams({ input: s.text, voice: s.voice, speed: String(s.speed), response_format: s.format });
  r.player = new ElementPlayer(`/v1/audio/speech?${q}`);
  r.player.el.onended = () => { if (run === r) { r.done = true; status("done"); } };
}

function speakWebSocket(r, s) {
  const url = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/v1/audio/speech/stream`;
  const ws = new WebSocket(url);
  ws.binaryType = "arraybuffer";
  r.ws = ws;
  return new Promise((resolve, reject) => {
    ws.onopen = () => sendText(r, s).catch(reject);
    ws.onerror = () => reject(new Error("WebSocket error"));
    ws.onclose = () => resolve();
    ws.onmessage = (event) => {
      if (run !== r) return;
      if (typeof event.data !== "string") {
        const bytes = new Uint8Array(event.data);
        r.player?.push(bytes.subarray(2 + bytes[1]));
        return;
      }
      const m = JSON.parse(event.data);
      if (m.type === "started") r.player = new PcmPlayer(m.sample_rate);
      else if (m.type === "timestamps") { r.words.push(...m.words); renderWords(r.text, r.words); }
      else if (m.type === "done") { finished(r); ws.close(); }
      else if (m.type === "error") { status(`error: ${m.message}`); ws.close(); }
    };
  });
}

/** The text in one message, or (LLM mode) in pieces of a few characters at an LLM's pace, then `end`. */
async function sendText(r, s) {
  const send = (m) => r.ws.readyState === WebSocket.OPEN && r.ws.send(JSON.stringify({ context_id: CONTEXT_ID, ...m }));
  const first = { type: "text", voice: s.voice, speed: s.speed, format: "pcm" };
  if (!s.llm) {
    r.text = s.text;
    renderWords(r.text, r.words);
    send({ ...first, text: s.text });
  } else {
    const pieces = s.text.match(/.{1,4}/gs) || [];
    for (const [i, piece] of pieces.entries()) {
      if (run !== r) return;
      r.text += piece;
      renderWords(r.text, r.words);
      send(i === 0 ? { ...first, text: piece } : { type: "text", text: piece });
      await new Promise((ok) => setTimeout(ok, 25 + 35 * Math.random()));
    }
  }
  send({ type: "end" });
}

function finished(r) {
  if (run !== r) return;
  r.finished = performance.now();
  r.done = true;
  const audioS = r.player ? r.player.audioSeconds : 0;
  $("audio-s").textContent = audioS.toFixed(2);
  if (audioS > 0) $("rtf").textContent = ((r.finished - r.clicked) / 1000 / audioS).toFixed(2);
  status("streamed; playing");
}

/** Stop button (and a new run): abort the request, cancel the context, silence what is scheduled. */
function stop(byUser = true) {
  const r = run;
  if (r === null) return;
  run = null;
  r.abort.abort();
  if (r.ws && r.ws.readyState === WebSocket.OPEN) {
    r.ws.send(JSON.stringify({ type: "cancel", context_id: CONTEXT_ID }));
    r.ws.close();
  }
  r.player?.stop();
  $("stop").disabled = true;
  if (byUser) status("stopped");
}

function tick() {
  const r = run;
  if (r === null || r.player === null) return;
  if (r.firstAudioMs === null && r.player.started) {
    r.firstAudioMs = performance.now() - r.clicked - Math.max(0, r.player.playedMs());
    $("ttfa").textContent = String(Math.round(r.firstAudioMs));
  }
  r.peak = Math.max(r.peak, level());
  highlight(r.player.playedMs());
  if (r.done && r.player.started && !r.player.playing) {
    $("stop").disabled = true;
    status("done");
  }
}

// --- setup ------------------------------------------------------------------------------------------

async function options() {
  const voices = await (await fetch("/v1/audio/voices")).json();
  for (const v of voices.data) $("voice").append(new Option(v.name || v.id, v.id));
  const api = await (await fetch("/openapi.json")).json();
  const formats = api.paths["/v1/audio/speech"].post.requestBody.content["application/json"].schema
    .properties.response_format.enum.filter((f) => BROWSER_FORMATS.has(f));
  formats.sort((a, b) => (a === "pcm" ? -1 : b === "pcm" ? 1 : 0));
  for (const f of formats) $("format").append(new Option(f === "pcm" ? "pcm (Web Audio)" : f, f));
}

$("speak").addEventListener("click", speak);
$("stop").addEventListener("click", () => stop(true));
$("speed").addEventListener("input", () => { $("speed-value").textContent = Number($("speed").value).toFixed(2); });
setInterval(tick, 20);
options().catch((e) => status(`cannot load options: ${e.message}`));

// For tests and the curious: the live state of the page.
window.playground = {
  level,
  get run() { return run; },
  get audioTime() { return audioCtx ? audioCtx.currentTime : 0; },
  get playing() { return run !== null && run.player !== null && run.player.playing; },
  get peak() { return run ? run.peak : 0; },
};
