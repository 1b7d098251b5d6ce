#!/usr/bin/env bash
# hvd's GPU checks, run on a machine with a GPU from the bundle `cargo xtask gpu-check
# --bundle DIR` built: one PASS or FAIL line per check (with the measured ratios), and
# exit status 1 when any failed. Needs the NVIDIA driver, NCCL (the system's,
# HVD_NCCL_LIBRARY, or PyTorch's nvidia-nccl wheel) and, for the PyTorch checks,
# PyTorch with CUDA. HVD_GPU_CHECK_LIBCUDA names the driver library to use.
set -u
here=$(cd "$(dirname "$0")" && pwd)
bin=$here/bin
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
checks=(driver nccl conformance-1 conformance-2 conformance-4 killed-rank ops-timeline fusion bench torch train_mnist)
failed=0
pass() { echo "PASS $1${2:+: $2}"; }
fail() { echo "FAIL $1: $2"; failed=1; }
last_line() { printf '%s\n' "$1" | grep -v '^\s*$' | tail -n 1; }

libcuda=${HVD_GPU_CHECK_LIBCUDA-$(ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 /{print $NF; exit}')}
if [ -z "$libcuda" ] || [ ! -e "$libcuda" ]; then
    fail driver "no NVIDIA driver here (libcuda.so.1 not found): run this bundle on a machine with a GPU"
    for check in "${checks[@]:1}"; do fail "$check" "not run: no GPU"; done
    exit 1
fi
export HVD_CUDA_LIBRARY=$libcuda
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "${gpus:-0}" -lt 1 ]; then
    fail driver "the driver is there ($libcuda) but nvidia-smi lists no GPU"
    for check in "${checks[@]:1}"; do fail "$check" "not run: no GPU"; done
    exit 1
fi
pass driver "$libcuda, $gpus GPU(s)"

# CUDA's libraries from PyTorch's wheels (nvidia/*/lib), which candle's CUDA build links.
nvidia_libs=$(python3 -c 'import glob, os, nvidia; print(":".join(sorted(glob.glob(os.path.join(list(nvidia.__path__)[0], "*", "lib")))))' 2>/dev/null)
[ -n "$nvidia_libs" ] && export LD_LIBRARY_PATH=$nvidia_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# NCCL: the system's, or the one PyTorch's wheels install.
if [ -z "${HVD_NCCL_LIBRARY:-}" ] && ! ldconfig -p 2>/dev/null | grep -q 'libnccl\.so\.2 '; then
    nccl=$(python3 -c 'import os, nvidia.nccl as n; print(os.path.join(list(n.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
    [ -n "$nccl" ] && export HVD_NCCL_LIBRARY=$nccl
fi
line=$("$bin/hvdrun" --check-build 2>&1 | grep '^  nccl' | sed 's/^  nccl  //')
case "$line" in
    NCCL*) pass nccl "$line" ;;
    *) fail nccl "${line:-hvdrun --check-build lists no nccl}" ;;
esac

# Several ranks on fewer GPUs: each process poses as a host of its own (NCCL before 2.30).
share() {
    if [ "$1" -gt "$gpus" ]; then
        export HVD_GPU_CHECK_SHARED=1 NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo}
    else
        unset HVD_GPU_CHECK_SHARED
    fi
}

for np in 1 2 4; do
    share "$np"
    out=$(timeout 1200 "$bin/hvdrun" -np "$np" "$bin/gpu_check" conformance 2>&1)
    status=$?
    passed=$(printf '%s\n' "$out" | grep -c 'PASSED')
    if [ "$status" -eq 0 ] && [ "$passed" -eq "$np" ]; then
        pass "conformance-$np" "$np rank(s): $(printf '%s\n' "$out" | grep -m1 -o 'PASSED.*' | sed 's/PASSED //')"
    else
        fail "conformance-$np" "exit $status: $(last_line "$out")"
    fi
done

share 3
out=$(HVD_BACKEND=nccl timeout 600 "$bin/hvdrun" -np 3 "$bin/gpu_check" killed 2>&1)
verdict="rank 1 failed first (killed by signal 9); ranks 0, 2 failed because they lost rank 1"
if printf '%s\n' "$out" | grep -qF "$verdict" \
    && [ "$(printf '%s\n' "$out" | grep -c 'ERROR: rank [02]: lost rank 1 during')" -eq 2 ]; then
    pass killed-rank "both survivors and hvdrun named rank 1"
else
    fail killed-rank "$(last_line "$out")"
fi

share 2
timeline=$work/timeline.json
out=$(HVD_BACKEND=nccl HVD_TIMELINE=$timeline timeout 600 "$bin/hvdrun" -np 2 "$bin/gpu_check" ops 2>&1)
status=$?
if [ "$status" -eq 0 ] && grep -q '"NCCL_ALLREDUCE"' "$timeline" 2>/dev/null \
    && grep -q '"MEMCPY_IN_FUSION_BUFFER"' "$timeline"; then
    pass ops-timeline "device collectives checked; the Timeline shows NCCL_ALLREDUCE and the device fusion copies"
else
    fail ops-timeline "exit $status: $(last_line "$out")"
fi

# Device Tensor Fusion: 200 tensors of 64 KiB fused, unfused, and as one tensor.
out=$(timeout 900 "$bin/hvd-bench" fusion --np 2 --backend nccl --json 2>&1)
verdict=$(printf '%s\n' "$out" | python3 -c '
import json, sys
rows = {}
for line in sys.stdin:
    if line.startswith("{"):
        row = json.loads(line)
        rows[row["variant"]] = row["time_us_median"]
on, off, one = rows["fusion on"], rows["fusion off"], rows["one tensor"]
ok = on <= 1.5 * one and off >= 5 * on
print(("PASS" if ok else "FAIL") + f" fused {on / 1e3:.2f} ms = {on / one:.2f}x one tensor (at most 1.5x), unfused {off / 1e3:.2f} ms = {off / on:.1f}x fused (at least 5x)")
' 2>&1)
case "$verdict" in
    PASS*) pass fusion "${verdict#PASS }" ;;
    FAIL*) fail fusion "${verdict#FAIL }" ;;
    *) fail fusion "$(last_line "$out") $(last_line "$verdict")" ;;
esac

# hvd-bench over NCCL beside torch.distributed over NCCL: the peer's time over hvd's.
sizes=1M,64M,256M
hvd_rows=$(timeout 900 "$bin/hvd-bench" allreduce --np 2 --backend nccl --sizes $sizes --json 2>&1)
torch_rows=$(timeout 900 python3 "$here/python/torch_dist_bench.py" --backend nccl --world 2 --sizes $sizes 2>&1)
verdict=$(python3 -c '
import json, sys
def rows(text):
    return {r["bytes"]: r["time_us_median"] for r in (json.loads(l) for l in text.splitlines() if l.startswith("{"))}
hvd, torch = rows(sys.argv[1]), rows(sys.argv[2])
common = sorted(set(hvd) & set(torch))
if not common:
    print("FAIL no common sizes measured")
else:
    print("PASS speed-up over torch.distributed NCCL (its time / hvd time): " + ", ".join(f"{b >> 20} MiB {torch[b] / hvd[b]:.2f}x" for b in common))
' "$hvd_rows" "$torch_rows" 2>&1)
case "$verdict" in
    PASS*) pass bench "${verdict#PASS }" ;;
    *) fail bench "${verdict#FAIL } (hvd: $(last_line "$hvd_rows"); torch: $(last_line "$torch_rows"))" ;;
esac

# hvd.torch on CUDA tensors with DistributedOptimizer: Horovod's MNIST recipe.
wheel=$(ls "$here"/python/hvd-*.whl 2>/dev/null | head -n 1)
if [ -z "$wheel" ]; then
    fail torch "not in this bundle: it was built without the hvd wheel"
else
    python3 -m zipfile -e "$wheel" "$work/py"
    out=$(PYTHONPATH=$work/py${PYTHONPATH:+:$PYTHONPATH} timeout 1200 "$bin/hvdrun" -np 2 python3 "$here/python/train_mnist.py" --epochs 1 2>&1)
    status=$?
    if [ "$status" -eq 0 ] && printf '%s\n' "$out" | grep -qi 'accuracy'; then
        pass torch "$(printf '%s\n' "$out" | grep -i 'accuracy' | tail -n 1)"
    else
        fail torch "exit $status: $(last_line "$out")"
    fi
fi

if [ -f "$bin/train_mnist.gz" ]; then
    gzip -dc "$bin/train_mnist.gz" > "$work/train_mnist" && chmod +x "$work/train_mnist"
    result=""
    # train_mnist takes the GPU of its local rank: as many ranks as GPUs, at most 2.
    ranks=1
    [ "$gpus" -ge 2 ] && ranks="1 2"
    for np in $ranks; do
        out=$(HVD_BACKEND=nccl timeout 1200 "$bin/hvdrun" -np "$np" "$work/train_mnist" --device cuda --epochs 1 2>&1)
        status=$?
        if [ "$status" -ne 0 ] || ! printf '%s\n' "$out" | grep -q 'test accuracy'; then
            result="exit $status at $np rank(s): $(last_line "$out")"
            break
        fi
    done
    if [ -z "$result" ]; then pass train_mnist "$(echo $ranks | sed 's/ / and /') rank(s) trained on CUDA"; else fail train_mnist "$result"; fi
else
    fail train_mnist "not in this bundle: it was built without candle's CUDA support"
fi

exit $failed
