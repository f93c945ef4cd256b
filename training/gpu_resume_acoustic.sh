#!/usr/bin/env bash
# Recovery used in the first run: restart only the acoustic trainer (after a data-loading fix), wait
# for the vocoder already running, then export + plot like gpu_run.sh's pipeline.
#   bash training/gpu_resume_acoustic.sh MINUTES
set -u
W=/tmp/uttera
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 OMP_NUM_THREADS=4
for pid in $(pgrep -f "gpu_run.sh pipeline") $(pgrep -f "training.train_acoustic"); do kill "$pid"; done
sleep 3
rm -rf $W/acoustic
python3 -m training.train_acoustic $W/feat $W/acoustic --minutes "$1" --workers 6 > $W/acoustic.out 2>&1
echo "[$(date +%T)] acoustic exit $?" >> $W/pipeline.log
while pgrep -f "training.train_vocoder" > /dev/null; do sleep 5; done
echo "[$(date +%T)] vocoder finished" >> $W/pipeline.log
python3 -m training.export $W/acoustic/ckpt.pt $W/vocoder/ckpt.pt $W/voice >> $W/pipeline.log 2>&1 || touch $W/FAILED
python3 -m training.plot $W/acoustic/log.jsonl $W/vocoder/log.jsonl $W/loss_curves.png >> $W/pipeline.log 2>&1
touch $W/DONE
