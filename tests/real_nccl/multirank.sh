#!/bin/bash
# Real NCCL with several ranks on one GPU: each rank is a process with its own NCCL_HOSTID, so
# NCCL sees one host per rank and runs its socket network transport over loopback. That gives
# what a one-rank job never does: ProxyOp, ProxyStep and ProxyCtrl events from the proxy thread
# and KernelCh events with GPU timestamps (%globaltimer). Not part of CI (no GPU there).
# Usage, after `cargo build --release --workspace`:
#   [WORLD=N (default 2)] bash tests/real_nccl/multirank.sh [BIN_DIR (default target/release)] [OUT_DIR (default real-nccl-out)]
# 1. A viewer records the job: 2 ranks, 200 all-reduces of 1 MiB, 100 send/recv groups.
# 2. Then rank 1 stalls 15 s before one more all-reduce (a straggler). The first viewer is
#    stopped (Ctrl-C) as the stall begins, and a second one attaches during it, as a user
#    would to a hung job: its snapshot must show rank 0's all-reduce in flight.
# 3. tests/real_nccl/check_snapshot.py checks both snapshots (counts, drops, clock conversion).
set -u
here=$(cd "$(dirname "$0")" && pwd)
bin=$(cd "${1:-target/release}" && pwd)
out=$(mkdir -p "${2:-real-nccl-out}" && cd "${2:-real-nccl-out}" && pwd)
plugin=$bin/libnccl_profiler_ncclprof.so
world=${WORLD:-2}
export PYTHONUNBUFFERED=1 NCCLPROF_DIR=$out/rendezvous-mr
# Loopback only, no InfiniBand: the same transport on any machine with one GPU.
export NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 NCCL_PROFILE_EVENT_MASK=0x7fff
export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,PROFILE
# Each rank's own dump of its whole run (the straggler's kernels included), written at finalize.
export NCCL_PROFILE_DUMP_FILE=$out/mr-dump/rank
rm -rf "$NCCLPROF_DIR" "$out"/mr-uid.* "$out/mr-dump"; mkdir -p "$out/mr-dump"
"$bin/ncclprof-tui" record --duration 100s -o "$out/mr-snapshot.json" > "$out/mr-record.log" 2>&1 &
rec=$!
sleep 2
pids=()
for r in $(seq 0 $((world - 1))); do
  timeout 110 python3 "$here/nccl_job.py" --plugin "$plugin" --name multirank --world $world --rank "$r" \
    --uid-file "$out/mr-uid" --iters 200 --p2p 100 --bytes 1048576 --stall-rank 1 --stall-s 15 \
    > "$out/mr-rank$r.log" 2>&1 &
  pids+=($!)
done
# The straggler phase: attach a second viewer while rank 0 waits for rank 1.
for _ in $(seq 1 900); do
  grep -q "stall-begin" "$out/mr-rank0.log" && break
  kill -0 "${pids[0]}" 2>/dev/null || break
  sleep 0.1
done
kill -INT $rec; wait $rec; echo "record rc=$?"; cat "$out/mr-record.log"
sleep 2
timeout 30 "$bin/ncclprof-tui" record --duration 5s -o "$out/mr-stall.json" > "$out/mr-stall.log" 2>&1
echo "stall record rc=$?"; cat "$out/mr-stall.log"
for r in "${!pids[@]}"; do
  wait "${pids[$r]}"; echo "rank $r rc=$?"
  grep -E "RESULT|NCCLPROF|Loaded|NET/|via NET|Channel 00" "$out/mr-rank$r.log" | head -30
done
python3 "$here/check_snapshot.py" "$out/mr-snapshot.json"
python3 "$here/check_snapshot.py" "$out/mr-stall.json"
for d in "$out"/mr-dump/rank.*.json; do python3 "$here/check_snapshot.py" "$d"; done
