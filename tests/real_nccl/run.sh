#!/bin/bash
# The plugin inside a real NCCL, on a machine with one GPU and PyTorch (which ships NCCL):
# a headless viewer records a 2-communicator job; communicators are created and destroyed 5
# times with a fork each time; a burst of 40 000 send/recv groups runs with every event type.
# Not part of CI (no GPU there). Usage, after `cargo build --release --workspace`:
#   bash tests/real_nccl/run.sh [BIN_DIR (default target/release)] [OUT_DIR (default real-nccl-out)]
# One rank per GPU: NCCL's one-rank collectives take a shortcut that emits no profiler events,
# so the events come from send/recv to self (GroupApi, P2pApi x2, Group, P2p x2, KernelLaunch).
set -u
here=$(cd "$(dirname "$0")" && pwd)
bin=$(cd "${1:-target/release}" && pwd)
out=$(mkdir -p "${2:-real-nccl-out}" && cd "${2:-real-nccl-out}" && pwd)
plugin=$bin/libnccl_profiler_ncclprof.so
job=(python3 "$here/nccl_job.py" --plugin "$plugin")
export PYTHONUNBUFFERED=1 NCCLPROF_DIR=$out/rendezvous
{
  nvidia-smi -L; uname -m; ldd --version | head -1
  python3 -c "import torch; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version())"
} 2>&1 | tee "$out/env.log"
rm -rf "$NCCLPROF_DIR" "$out/dump"; mkdir -p "$out/dump"
# 1. The viewer first (it creates the rendezvous directory), then the job.
timeout 90 "$bin/ncclprof-tui" record --duration 25s -o "$out/snapshot.json" > "$out/record.log" 2>&1 &
rec=$!
sleep 2
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,PROFILE NCCL_PROFILE_EVENT_MASK=0x7fff \
  NCCL_PROFILE_DUMP_FILE=$out/dump/job timeout 150 \
  "${job[@]}" --name viewer --iters 2000 --p2p 300 --comms 2 --bytes 1048576 > "$out/job.log" 2>&1
echo "job rc=$?"; grep -E "RESULT|NCCLPROF|Loaded" "$out/job.log"
wait $rec; echo "record rc=$?"; cat "$out/record.log"
# 2. Communicator churn and fork: 5 x (8 communicators, 160 groups, a fork, destroy all).
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,PROFILE NCCL_PROFILE_EVENT_MASK=0x7fff timeout 150 \
  "${job[@]}" --name churn --cycles 5 --comms 8 --iters 100 --p2p 80 --fork > "$out/churn.log" 2>&1
echo "churn rc=$?"; grep -E "RESULT|NCCLPROF" "$out/churn.log"
# 3. A burst: 40 000 groups (280 000 events) as fast as one thread issues them.
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=PROFILE NCCL_PROFILE_EVENT_MASK=0x7fff timeout 150 \
  "${job[@]}" --name burst --iters 0 --p2p 40000 > "$out/burst.log" 2>&1
echo "burst rc=$?"; grep -E "RESULT|NCCLPROF" "$out/burst.log"
python3 - "$out/snapshot.json" <<'PY'
import collections, json, sys
d = json.load(open(sys.argv[1]))
c = collections.Counter(e.get("cat") for e in d["traceEvents"] if e.get("ph") == "X")
print("snapshot:", sum(c.values()), "events", dict(c))
print("process state:", [p.get("state") for p in d["otherData"]["processes"]])
PY
