#!/usr/bin/env bash
# hvd's GPU checks, run on a machine with a GPU from the bundle `cargo xtask gpu-check
# --bundle DIR` built. Needs the NVIDIA driver, NCCL (the system's, HVD_NCCL_LIBRARY, or
# PyTorch's nvidia-nccl wheel) and, for the PyTorch checks, PyTorch with CUDA; no
# internet (every training run uses synthetic data).
#
#   bash DIR/run            one PASS or FAIL line per check, with the figure that decided
#                           it; exit status 1 when any failed
#   bash DIR/run torch-gpu  the same for the PyTorch checks on CUDA (about 6 minutes):
#                           hvd.torch's ResNet-50 speed against plain PyTorch and DDP,
#                           Horovod's synthetic benchmark and its whole test_torch.py
#   bash DIR/run [torch-gpu] --budget   each check's time limit in seconds, and their sum
#
# Each check's whole output goes to DIR/logs/<check>.log, or into the folder
# HVD_GPU_CHECK_LOGS names. HVD_GPU_CHECK_BUDGET=check=seconds,... changes time limits
# (a slower machine, more GPUs); HVD_GPU_CHECK_LIBCUDA names the driver library to use.
set -u

# Each check's time limit in seconds, in the order the checks run. Their sum leaves room
# within 5 minutes (6 for torch-gpu) for the untimed steps (unpacking, the verdicts),
# which xtask's tests hold it to: a check that hangs costs its own limit and no more.
# torch-gpu runs apart, so that the default run stays within its 5 minutes.
prerequisites=(
    driver 10
    nccl 10
)
default_budget=(
    "${prerequisites[@]}"
    conformance-1 20
    conformance-2 25
    conformance-4 35
    killed-rank 20
    ops-timeline 15
    fusion 25
    fusion-overhead 15
    bench 45
    torch 40
    train_mnist 20
)
torch_gpu_budget=(
    "${prerequisites[@]}"
    torch-gpu-resnet50-1 40
    torch-gpu-resnet50-2 60
    torch-gpu-synthetic 60
    torch-gpu-test_torch 180
)

suite=default show_budget=
for arg in "$@"; do
    case "$arg" in
        torch-gpu) suite=torch_gpu ;;
        --budget) show_budget=1 ;;
        *)
            echo "usage: $0 [torch-gpu] [--budget]" >&2
            exit 2
            ;;
    esac
done

declare -A limit
for ((i = 0; i < ${#default_budget[@]}; i += 2)); do
    limit[${default_budget[i]}]=${default_budget[i + 1]}
done
for ((i = 0; i < ${#torch_gpu_budget[@]}; i += 2)); do
    limit[${torch_gpu_budget[i]}]=${torch_gpu_budget[i + 1]}
done
declare -n budget=${suite}_budget
checks=()
for ((i = 0; i < ${#budget[@]}; i += 2)); do
    checks+=("${budget[i]}")
done
budget_overrides=${HVD_GPU_CHECK_BUDGET:-}
for pair in ${budget_overrides//,/ }; do
    name=${pair%%=*} seconds=${pair#*=}
    if [ -z "${limit[$name]+set}" ] || ! [[ $seconds =~ ^[0-9]+$ ]]; then
        echo "HVD_GPU_CHECK_BUDGET: $pair is not check=seconds for one of: $(printf '%s\n' "${!limit[@]}" | sort | xargs)" >&2
        exit 2
    fi
    limit[$name]=$seconds
done

if [ -n "$show_budget" ]; then
    total=0
    for check in "${checks[@]}"; do
        printf '%-22s %4d\n' "$check" "${limit[$check]}"
        total=$((total + limit[$check]))
    done
    printf '%-22s %4d\n' total "$total"
    exit 0
fi

here=$(cd "$(dirname "$0")" && pwd)
bin=$here/bin
logs=${HVD_GPU_CHECK_LOGS:-$here/logs}
mkdir -p "$logs" || exit 2
work=$(mktemp -d)
child=
trap 'rm -rf "$work"' EXIT
# Ctrl-C or a kill stops the running command too: it runs in a process group of its own.
trap '[ -n "$child" ] && kill -TERM "$child" 2>/dev/null; exit 130' INT TERM

pass() { outcome=PASS figure=$1; }
fail() { outcome=FAIL figure=$1; }

# Why a check failed, from its log: the first error a rank printed, else the last line
# (leaving out the commands that step writes there).
why() {
    grep -m1 'ERROR' "$log" || grep -v -e '^\s*$' -e '^\$ ' "$log" | tail -n 1
}

# Runs one command of the current check, its output appended to the check's log, within
# what is left of the check's time limit (or `--within N` seconds, if less). A command
# that outlives it gets SIGTERM (hvdrun then stops its ranks) and SIGKILL `grace` seconds
# later, both inside the limit; the check is then marked as timed out.
grace=3
step() {
    local left=$((deadline - SECONDS - grace))
    if [ "$1" = --within ]; then
        [ "$2" -lt "$left" ] && left=$2
        shift 2
    fi
    if [ "$left" -lt 1 ]; then
        timed_out=1
        return 124
    fi
    printf '$ %s\n' "$*" >>"$log"
    local start=$SECONDS status
    timeout -k "$grace" "$left" "$@" >>"$log" 2>&1 &
    child=$!
    wait "$child"
    status=$?
    child=
    if { [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; } && [ $((SECONDS - start)) -ge "$left" ]; then
        timed_out=1
    fi
    return "$status"
}

# Passes or fails the check on the "PASS figure" or "FAIL figure" line a verdict prints;
# a verdict that prints neither (no result to judge) fails with the log's reason.
judge() {
    local verdict
    verdict=$("$@" 2>>"$log")
    case "$verdict" in
        PASS\ *) pass "${verdict#PASS }" ;;
        FAIL\ *) fail "${verdict#FAIL }" ;;
        *) fail "no result: $(why)" ;;
    esac
}

# Several ranks on fewer GPUs: hvd-nccl gives each rank a host id of its own (NCCL
# before 2.30 refuses two ranks of a communicator on one GPU otherwise), and NCCL's
# socket transport between those "hosts" runs over loopback.
share() {
    if [ "$1" -gt "$gpus" ]; then
        export NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo}
    fi
}

gpus=0
check_driver() {
    local libcuda=${HVD_GPU_CHECK_LIBCUDA-$(ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 /{print $NF; exit}')}
    if [ -z "$libcuda" ] || [ ! -e "$libcuda" ]; then
        fail "no NVIDIA driver here (libcuda.so.1 not found): run this bundle on a machine with a GPU"
        return
    fi
    step nvidia-smi -L
    gpus=$(grep -c '^GPU' "$log")
    if [ "$gpus" -lt 1 ]; then
        fail "the driver is there ($libcuda) but nvidia-smi lists no GPU"
        return
    fi
    export HVD_CUDA_LIBRARY=$libcuda
    pass "$libcuda, $gpus GPU(s)"
}

check_nccl() {
    # CUDA's libraries from PyTorch's wheels (nvidia/*/lib), which candle's CUDA build links.
    local nvidia_libs nccl line
    nvidia_libs=$(python3 -c 'import glob, os, nvidia; print(":".join(sorted(glob.glob(os.path.join(list(nvidia.__path__)[0], "*", "lib")))))' 2>/dev/null)
    [ -n "$nvidia_libs" ] && export LD_LIBRARY_PATH=$nvidia_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    # NCCL: the system's, or the one PyTorch's wheels install.
    if [ -z "${HVD_NCCL_LIBRARY:-}" ] && ! ldconfig -p 2>/dev/null | grep -q 'libnccl\.so\.2 '; then
        nccl=$(python3 -c 'import os, nvidia.nccl as n; print(os.path.join(list(n.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
        [ -n "$nccl" ] && export HVD_NCCL_LIBRARY=$nccl
    fi
    echo "HVD_NCCL_LIBRARY=${HVD_NCCL_LIBRARY:-} LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}" >>"$log"
    step "$bin/hvdrun" --check-build
    line=$(grep '^  nccl' "$log" | sed 's/^  nccl  //')
    case "$line" in
        NCCL*) pass "$line" ;;
        *) fail "${line:-hvdrun --check-build lists no nccl}" ;;
    esac
}

check_conformance() {
    share "$1"
    step "$bin/hvdrun" -np "$1" "$bin/gpu_check" conformance || {
        fail "exit $?: $(why)"
        return
    }
    if [ "$(grep -c 'PASSED' "$log")" -eq "$1" ]; then
        pass "$1 rank(s): $(grep -m1 -o 'PASSED.*' "$log" | sed 's/PASSED //')"
    else
        fail "$(grep -c 'PASSED' "$log") of $1 rank(s) passed: $(why)"
    fi
}

check_killed_rank() {
    share 3
    HVD_BACKEND=nccl step "$bin/hvdrun" -np 3 "$bin/gpu_check" killed
    if grep -qF "rank 1 failed first (killed by signal 9); ranks 0, 2 failed because they lost rank 1" "$log" \
        && [ "$(grep -c 'ERROR: rank [02]: lost rank 1 during' "$log")" -eq 2 ]; then
        pass "both survivors and hvdrun named rank 1"
    else
        fail "$(grep -v -e '^\s*$' -e '^\$ ' "$log" | tail -n 1)"
    fi
}

check_ops_timeline() {
    share 2
    local timeline=$logs/ops-timeline.json
    rm -f "$timeline"
    HVD_BACKEND=nccl HVD_TIMELINE=$timeline step "$bin/hvdrun" -np 2 "$bin/gpu_check" ops || {
        fail "exit $?: $(why)"
        return
    }
    if grep -q '"NCCL_ALLREDUCE"' "$timeline" 2>/dev/null && grep -q '"MEMCPY_IN_FUSION_BUFFER"' "$timeline"; then
        pass "device collectives checked; the Timeline shows NCCL_ALLREDUCE and the device fusion copies"
    else
        fail "the Timeline ($timeline) lacks NCCL_ALLREDUCE or MEMCPY_IN_FUSION_BUFFER"
    fi
}

# hvd-bench fusion's median step times (µs) from the check's log, for the verdicts below:
# 200 tensors of 64 KiB fused (on) and unfused (off), and their bytes as one tensor.
fusion_times='
import json, sys
times = {}
for line in open(sys.argv[1]):
    if line.startswith("{"):
        row = json.loads(line)
        times[row["variant"]] = row["time_us_median"]
on, off, one = times["fusion on"], times["fusion off"], times["one tensor"]
'

# Device Tensor Fusion across 2 ranks: the fused step is almost one tensor's.
check_fusion() {
    share 2
    step "$bin/hvd-bench" fusion --np 2 --backend nccl --iters 8 --json || {
        fail "exit $?: $(why)"
        return
    }
    judge python3 -c "$fusion_times"'
ok = on <= 1.2 * one and off >= 5 * on
print(("PASS" if ok else "FAIL") + f" fused {on / 1e3:.2f} ms = {on / one:.2f}x one tensor (at most 1.2x), unfused {off / 1e3:.2f} ms = {off / on:.1f}x fused (at least 5x)")
' "$log"
}

# The runtime's own cost per fused tensor, where no wire hides it: one rank.
check_fusion_overhead() {
    share 1
    step "$bin/hvd-bench" fusion --np 1 --backend nccl --iters 50 --json || {
        fail "exit $?: $(why)"
        return
    }
    judge python3 -c "$fusion_times"'
above = on - one
ok = above <= 0.5 * 200
print(("PASS" if ok else "FAIL") + f" 200 x 64 KiB fused {on:.1f} us, one tensor {one:.1f} us: {above:+.1f} us, {above / 200:.2f} us per tensor (at most 0.5)")
' "$log"
}

# hvd-bench over NCCL beside torch.distributed over NCCL: the peer's time over hvd's.
check_bench() {
    local sizes=1M,64M,256M hvd_rows=$work/bench-hvd.jsonl torch_rows=$work/bench-torch.jsonl share_gpu=
    share 2
    step --within 20 "$bin/hvd-bench" allreduce --np 2 --backend nccl --sizes $sizes --json || {
        fail "hvd-bench exit $?: $(why)"
        return
    }
    grep '^{' "$log" >"$hvd_rows"
    if [ "$gpus" -lt 2 ]; then
        # hvd's ranks take host ids of their own; torch.distributed's need telling.
        echo "torch.distributed: 2 ranks on $gpus GPU: each sets NCCL_HOSTID=peer-<rank> (--share-gpu)" >>"$log"
        share_gpu=--share-gpu
    fi
    local before
    before=$(wc -l <"$log")
    step python3 "$here/python/torch_dist_bench.py" --backend nccl --world 2 --sizes $sizes $share_gpu || {
        fail "torch_dist_bench.py exit $?: $(why)"
        return
    }
    tail -n +$((before + 1)) "$log" | grep '^{' >"$torch_rows"
    judge python3 -c '
import json, sys
def rows(path):
    return {r["bytes"]: r["time_us_median"] for r in (json.loads(l) for l in open(path))}
hvd, torch = rows(sys.argv[1]), rows(sys.argv[2])
common = sorted(set(hvd) & set(torch))
if common:
    print("PASS speed-up over torch.distributed NCCL (its time / hvd time): " + ", ".join(f"{b >> 20} MiB {torch[b] / hvd[b]:.2f}x" for b in common))
else:
    print("FAIL no size measured by both")
' "$hvd_rows" "$torch_rows"
}

on_pythonpath() {
    case ":${PYTHONPATH:-}:" in
        *":$1:"*) ;;
        *) export PYTHONPATH=$1${PYTHONPATH:+:$PYTHONPATH} ;;
    esac
}

# Puts the bundle's wheel python/<name>-*.whl on PYTHONPATH, unpacked (once per run; the
# GPU machine has no index to install from); fails the check when the bundle lacks it.
use_wheel() {
    local dir=$work/wheels/$1 wheel
    if [ ! -d "$dir" ]; then
        wheel=$(ls "$here"/python/"$1"-*.whl 2>/dev/null | head -n 1)
        if [ -z "$wheel" ]; then
            fail "not in this bundle: it was built without the $1 wheel"
            return 1
        fi
        step python3 -m zipfile -e "$wheel" "$dir" || {
            fail "cannot unpack $wheel: $(why)"
            rm -rf "$dir"
            return 1
        }
    fi
    on_pythonpath "$dir"
}

# hvd.torch on CUDA tensors with DistributedOptimizer: Horovod's MNIST recipe.
check_torch() {
    use_wheel hvd || return
    share 2
    step "$bin/hvdrun" -np 2 python3 "$here/python/train_mnist.py" \
        --epochs 1 --synthetic --synthetic-size 12000 || {
        fail "exit $?: $(why)"
        return
    }
    if grep -q 'Accuracy' "$log"; then
        pass "$(grep 'Accuracy' "$log" | tail -n 1)"
    else
        fail "no test accuracy printed: $(why)"
    fi
}

# candle's MNIST example on CUDA; it takes the GPU of its local rank, so as many ranks as
# GPUs, at most 2.
check_train_mnist() {
    if [ ! -f "$bin/train_mnist.gz" ]; then
        fail "not in this bundle: it was built without candle's CUDA support"
        return
    fi
    gzip -dc "$bin/train_mnist.gz" >"$work/train_mnist" && chmod +x "$work/train_mnist"
    local ranks=1 np
    [ "$gpus" -ge 2 ] && ranks="1 2"
    for np in $ranks; do
        share "$np"
        HVD_BACKEND=nccl step "$bin/hvdrun" -np "$np" "$work/train_mnist" --device cuda --epochs 1 || {
            fail "exit $? at $np rank(s): $(why)"
            return
        }
    done
    if [ "$(grep -c 'test accuracy' "$log")" -eq "$(echo $ranks | wc -w)" ]; then
        pass "$(echo $ranks | sed 's/ / and /') rank(s) trained on CUDA: $(grep 'test accuracy' "$log" | tail -n 1 | sed 's/  */ /g')"
    else
        fail "no test accuracy printed: $(why)"
    fi
}

# ResNet-50's rows (bench_resnet50.py's JSON lines) from the check's log, for the verdicts
# below, and the line comparing hvd.torch with a peer: PASS when hvd reaches `least` of
# the peer's images/s per rank.
resnet_rows='
import json, sys
rows = {}
for line in open(sys.argv[1]):
    at = line.find("{\"bench\"")
    if at >= 0:
        row = json.loads(line[at:])
        rows[row["mode"], row["ranks"]] = row
def compare(label, hvd, peer, name, least):
    ours, theirs = hvd["img_per_s_per_rank"], peer["img_per_s_per_rank"]
    ours_ms, theirs_ms, path = hvd["ms_per_step"], peer["ms_per_step"], hvd["device_path"][0]
    ratio = ours / theirs
    print(("PASS" if ratio >= least else "FAIL") + f" {label}: {ratio:.2f}x {name} ({ours:.0f} vs {theirs:.0f}"
          f" img/s per rank, {ours_ms:.1f} vs {theirs_ms:.1f} ms per step; at least {least}x), hvd.torch path: {path}")
'

# ResNet-50 (batch 64, 224x224) on one rank: hvd.torch's DistributedOptimizer costs
# almost nothing over plain PyTorch.
check_torch_gpu_resnet50_1() {
    use_wheel hvd || return
    share 1
    step python3 "$here/python/bench_resnet50.py" --mode plain || {
        fail "plain PyTorch exit $?: $(why)"
        return
    }
    step "$bin/hvdrun" -np 1 python3 "$here/python/bench_resnet50.py" --mode hvd || {
        fail "hvd.torch exit $?: $(why)"
        return
    }
    judge python3 -c "$resnet_rows"'
compare("hvd.torch 1 rank", rows["hvd", 1], rows["plain", 1], "plain", 0.95)
' "$log"
}

# The same at 2 ranks: hvd.torch at least as fast as DistributedDataParallel over NCCL
# (each rank a NCCL host id of its own where they share a GPU).
check_torch_gpu_resnet50_2() {
    use_wheel hvd || return
    share 2
    step "$bin/hvdrun" -np 2 python3 "$here/python/bench_resnet50.py" --mode hvd || {
        fail "hvd.torch exit $?: $(why)"
        return
    }
    step python3 "$here/python/bench_resnet50.py" --mode ddp --world 2 || {
        fail "DDP exit $?: $(why)"
        return
    }
    judge python3 -c "$resnet_rows"'
compare("hvd.torch 2 ranks", rows["hvd", 2], rows["ddp", 2], "DDP", 1.0)
' "$log"
}

# Horovod's own programs, unmodified: hvd, the shim that maps `import horovod` onto it,
# and share_gpus, which runs them with more ranks than GPUs (they pin cuda:local_rank).
horovod_suite=$here/python/horovod-tests
use_horovod() {
    if [ ! -d "$horovod_suite/upstream" ]; then
        fail "not in this bundle: it was built without Horovod's tests (../shared/horovod-tests)"
        return 1
    fi
    use_wheel hvd || return 1
    on_pythonpath "$here/python"
    on_pythonpath "$horovod_suite/shim"
    echo "Horovod's programs run under share_gpus: CUDA device N is N modulo the $gpus GPU(s)" >>"$log"
}

# Horovod's pytorch_synthetic_benchmark.py on CUDA at 1 and 2 ranks: it runs and prints
# its totals.
check_torch_gpu_synthetic() {
    use_horovod || return
    local np
    for np in 1 2; do
        share "$np"
        step "$bin/hvdrun" -np "$np" python3 -m share_gpus \
            "$horovod_suite/upstream/examples/pytorch/pytorch_synthetic_benchmark.py" \
            --num-warmup-batches 2 --num-batches-per-iter 5 --num-iters 2 || {
            fail "exit $? at $np rank(s): $(why)"
            return
        }
    done
    local totals
    totals=$(grep -o 'Total img/sec on [0-9]* GPU.*' "$log")
    if [ "$(echo "$totals" | grep -c .)" -eq 2 ]; then
        pass "$(echo "$totals" | paste -sd ';' | sed 's/;/; /')"
    else
        fail "no 'Total img/sec on N GPU(s)' line at both 1 and 2 ranks: $(why)"
    fi
}

# Horovod's test_torch.py, one 2-rank pytest session as Horovod's CI runs it. Counts
# each test once (a failure on any rank fails it); failures listed in cpu_failures.tsv
# (test, what its failure says, why: they fail on CPU too) do not fail the check.
horovod_test_counts='
import re, sys
rank = {"PASSED": 0, "SKIPPED": 1, "FAILED": 2, "ERROR": 2}
outcome, message = {}, {}
for line in open(sys.argv[1]):
    m = re.search(r"::(test_\w+) (PASSED|SKIPPED|FAILED|ERROR)\b", line)
    if m:
        outcome[m[1]] = max(outcome.get(m[1], 0), rank[m[2]])
    m = re.search(r"(?:FAILED|ERROR) \S*::(test_\w+) - (.*)", line)
    if m:
        message.setdefault(m[1], m[2].strip())
excused = [line.rstrip("\n").split("\t") for line in open(sys.argv[2]) if line.strip()]
failed = sorted(t for t, o in outcome.items() if o == 2)
def known(test):
    return next((why for name, says, why in excused if name == test and says in message.get(test, "")), None)
theirs = [t for t in failed if known(t)]
ours = [t for t in failed if not known(t)]
counts = f"2 ranks: {sum(o == 0 for o in outcome.values())} passed, {len(failed)} failed, {sum(o == 1 for o in outcome.values())} skipped"
if theirs:
    counts += "; failed as on CPU: " + ", ".join(theirs) + " (" + "; ".join(sorted({known(t) for t in theirs})) + ")"
if ours:
    says = {t: message.get(t, "no message")[:100] for t in ours}
    counts += "; failed: " + ", ".join(f"{t} ({says[t]})" for t in ours)
print(("PASS " if outcome and not ours else "FAIL ") + counts)
'

check_torch_gpu_test_torch() {
    use_horovod && use_wheel mock || return
    share 2
    # A rank whose pytest fails still exits 0, so that hvdrun lets the other rank finish.
    # COLUMNS: pytest cuts its summary lines (and the failures' messages read above) to
    # the terminal's width, 80 without one.
    step "$bin/hvdrun" -np 2 bash -c 'COLUMNS=1000 python3 -m share_gpus -m pytest "$@"; echo "rank $HVD_RANK: pytest exit $?"' pytest \
        -p no:cacheprovider -v -rA --timeout=45 --timeout-method=thread \
        "$horovod_suite/upstream/test/parallel/test_torch.py"
    judge python3 -c "$horovod_test_counts" "$log" "$horovod_suite/cpu_failures.tsv"
    so_far="by then $figure"
}

failed=0
for check in "${checks[@]}"; do
    log=$logs/$check.log
    : >"$log"
    deadline=$((SECONDS + limit[$check])) timed_out=0 outcome=FAIL figure="the check gave no verdict" so_far=
    if [ "$check" != driver ] && [ "$gpus" -lt 1 ]; then
        fail "not run: no GPU"
    else
        case "$check" in
            conformance-*) check_conformance "${check#conformance-}" ;;
            *) "check_${check//-/_}" ;;
        esac
    fi
    if [ "$timed_out" = 1 ]; then
        [ -n "$so_far" ] || so_far="its log's last line: $(grep -v -e '^\s*$' "$log" | tail -n 1)"
        fail "timed out after ${limit[$check]} s ($so_far)"
    fi
    [ "$outcome" = PASS ] || failed=1
    echo "$outcome $check${figure:+: $figure}" | tee -a "$log"
done
echo "each check's whole output: $logs/<check>.log" >&2
exit $failed
