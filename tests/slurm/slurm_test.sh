#!/usr/bin/env bash
# CTest `slurm`: a real SLURM cluster (scripts/slurm.sh: slurmctld, one slurmd on
# each of 2 emulated hosts) runs dtrain through the ordinary commands.
#  1. examples/slurm/train.sbatch (mpirun inside sbatch), 2 nodes x 2 tasks,
#     suspended and resumed (scontrol) on the way, ends with the same
#     parameters, loss and accuracy as the same run under plain mpirun on the
#     same emulated hosts (netsim.sh mpirun);
#     2 nodes x 1 task x 2 CPUs: each rank computes with 2 threads;
#  2. srun --mpi=pmix launches the ranks as SLURM tasks: the same parameters;
#  3. --threads above --cpus-per-task, srun without --mpi=pmix: one line, exit 2;
#  4. SIGUSR1 to the batch script (what --signal=B:USR1@60 sends), once training
#     is under way: the ranks save one checkpoint, the script requeues the job,
#     the next run resumes (--resume auto) and ends with the uninterrupted run's
#     parameters, byte for byte; a plain scancel (SIGTERM to every process)
#     stops the ranks with a checkpoint and the job exits 143; submitted again,
#     it ends with the uninterrupted run's parameters, byte for byte.
# No timing checks. Exit 77 (CTest SKIP_RETURN_CODE) where slurm, munge or
# network namespaces are missing.
#  5. dtrain plan --write-sbatch: the written script runs as it is and trains
#     the configuration the plan chose.
#  6. a node lost mid-job (every process in its namespace killed): the example
#     script names it in one line and the node left resumes the last checkpoint
#     at 2 ranks and finishes.
#   slurm_test.sh SLURM_SH DTRAIN SBATCH_SCRIPT MACHINE_FILE
set -uo pipefail
slurm="$1" dtrain="$2" job="$3" machine="$4"
netsim="$(dirname "$slurm")/netsim.sh"

# Its own instance (names dtrain212-*, subnet 10.213.212.0/24), beside the
# netsim tests' 213; its own lock.
NETSIM_ID=212 NETSIM_LOCK=dtrain-slurm-test.lock source "$(dirname "$0")/../netsim/common.sh" \
  slurmctld slurmd munged sbatch srun squeue scontrol scancel unshare ||
  { echo "FAILED: cannot read tests/netsim/common.sh"; exit 1; }
# The cluster first (jobs, daemons: it kills what runs on the hosts while their
# namespaces exist, then takes the network down), then common.sh's extras.
trap 'bash "$slurm" down >/dev/null 2>&1; eval "$netsim_exit_extra"' EXIT
# Not under /tmp: each node has its own (scripts/slurm.sh), as on a cluster.
work=$(mktemp -d /var/tmp/dtrain-slurm-test.XXXXXX)
netsim_on_exit "rm -rf '$work'"
cd "$work" || fail "cd $work"  # the submit directory: the jobs' checkpoints go under it

bash "$slurm" up 2 --cpus-per-node 2 || fail "slurm.sh up 2"
eval "$(bash "$slurm" env)"
export SLURM_CONF DTRAIN="$dtrain" DTRAIN_COMM_TIMEOUT_MS=120000 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# mlp on synthetic data, 4 ranks: deterministic (seed, data order, reduction order).
train=(--model mlp --dataset synthetic --synthetic-size 2048 --batch-size 32 --epochs 100 --seed 11 --lr 0.05
       --momentum 0.9 --progress off)
steps=80

# The final line of a run's output: the result line.
result() { grep '^{' "$1" | tail -n 1; }
field() { grep -o "\"$2\":[^,}]*" <<<"$1" | head -n 1 | cut -d: -f2; }
same_file() { cmp -s "$1" "$2" || fail "$3: $1 and $2 differ"; }

# Waits (6 minutes at most) until job $1 is in state $2 (squeue forgets a job, scontrol keeps it).
wait_state() {
  local i st=""
  for ((i = 0; i < 720; ++i)); do
    st=$(scontrol show job "$1" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2)
    [[ "$st" == "$2" ]] && return 0
    [[ "$st" == FAILED || "$st" == CANCELLED || "$st" == TIMEOUT ]] && return 1
    sleep 0.5
  done
  return 1
}

echo "--- plain mpirun, 2 ranks on each of 2 emulated hosts"
timeout 300 bash "$netsim" mpirun -np 4 --ranks-per-host 2 -- env DTRAIN_COMM_TIMEOUT_MS=120000 \
  "$dtrain" train --backend mpi "${train[@]}" --max-steps $steps --save "$work/mpirun.safetensors" \
  > "$work/mpirun.out" || fail "dtrain under plain mpirun: $(tail -n 3 "$work/mpirun.out")"
ref=$(result "$work/mpirun.out")
echo "$ref"

# Waits (5 minutes at most) until the job writing metrics file $1 has logged a step.
wait_progress() {
  local i
  for ((i = 0; i < 1200; ++i)); do [[ -s "$1" ]] && return 0; sleep 0.25; done
  return 1
}

echo "--- sbatch examples/slurm/train.sbatch, 2 nodes x 2 tasks x 1 CPU, suspended and resumed"
id=$(sbatch --parsable --nodes 2 --ntasks-per-node 2 --cpus-per-task 1 \
     --output "$work/sbatch.out" "$job" "${train[@]}" --max-steps $steps --save "$work/sbatch.safetensors" \
     --log-every 1 --metrics "$work/sbatch.jsonl") || fail "sbatch"
wait_progress "$work/sbatch.jsonl" || fail "job $id made no progress within 5 minutes: $(tail -n 5 "$work/sbatch.out")"
scontrol suspend "$id" || fail "scontrol suspend $id"
wait_state "$id" SUSPENDED || fail "job $id was not suspended"
sleep 1  # the ranks stopped mid-run (not a timing check: any pause will do)
scontrol resume "$id" || fail "scontrol resume $id"
wait_state "$id" COMPLETED || fail "job $id did not complete: $(tail -n 5 "$work/sbatch.out")"
got=$(result "$work/sbatch.out")
echo "$got"
[[ $(field "$got" workers) == 4 && $(field "$got" threads) == 1 ]] ||
  fail "the sbatch run did not have 4 workers of 1 thread: $got"
for f in test_loss test_accuracy; do  # (train_loss: the last logged window, which --log-every sets)
  [[ $(field "$got" $f) == "$(field "$ref" $f)" ]] || fail "$f: $(field "$got" $f) under sbatch, $(field "$ref" $f) under mpirun"
done
same_file "$work/sbatch.safetensors" "$work/mpirun.safetensors" "sbatch against plain mpirun"

echo "--- sbatch examples/slurm/train.sbatch, 2 nodes x 1 task x 2 CPUs: each rank computes with 2 threads"
# (mpirun alone binds each rank to one core, and --threads auto would then take 1.)
sbatch --wait --nodes 2 --ntasks-per-node 1 --cpus-per-task 2 --output "$work/cpus.out" "$job" "${train[@]}" \
  --max-steps 2 >/dev/null || fail "the 2 x 1 x 2 CPUs job failed: $(tail -n 5 "$work/cpus.out")"
got=$(result "$work/cpus.out")
[[ $(field "$got" workers) == 2 && $(field "$got" threads) == 2 ]] ||
  fail "the ranks of tasks of 2 CPUs did not have 2 threads each: $got"

echo "--- srun --mpi=pmix, 2 nodes x 2 tasks"
timeout 300 srun --mpi=pmix --nodes 2 --ntasks-per-node 2 --cpus-per-task 1 \
  "$dtrain" train --backend mpi "${train[@]}" --max-steps $steps --save "$work/srun.safetensors" \
  > "$work/srun.out" || fail "srun --mpi=pmix: $(tail -n 3 "$work/srun.out")"
same_file "$work/srun.safetensors" "$work/mpirun.safetensors" "srun --mpi=pmix against plain mpirun"

echo "--- --threads 2 in a task of 1 CPU"
out=$(srun --nodes 1 --ntasks 1 --cpus-per-task 1 "$dtrain" train "${train[@]}" --max-steps 1 --threads 2 2>&1)
rc=$?
[[ $rc == 2 ]] || fail "--threads 2 with --cpus-per-task 1: exit $rc, not 2: $out"
grep -q "dtrain: error: --threads 2: this SLURM task was given 1 CPU" <<<"$out" || fail "no one-line error: $out"

echo "--- srun without --mpi=pmix"
out=$(srun --nodes 1 --ntasks 1 "$dtrain" train --backend mpi "${train[@]}" --max-steps 1 2>&1)
rc=$?
[[ $rc == 2 ]] && grep -q "dtrain: error: --backend mpi under srun needs the ranks joined by PMIx" <<<"$out" ||
  fail "srun --backend mpi without --mpi=pmix: exit $rc, not 2 with one line: $out"

echo "--- preempted by SIGUSR1 to the batch script, requeued, resumed"
id=$(sbatch --parsable --nodes 2 --ntasks-per-node 2 --cpus-per-task 1 \
     --output "$work/preempt.out" "$job" "${train[@]}" --max-steps $steps --log-every 1 \
     --metrics "$work/preempt.jsonl" --save "$work/preempt.safetensors") || fail "sbatch (preempt)"
wait_progress "$work/preempt.jsonl" || fail "job $id made no progress within 5 minutes: $(tail -n 5 "$work/preempt.out")"
scancel --batch --signal=USR1 "$id" || fail "scancel --batch --signal=USR1 $id"
wait_state "$id" COMPLETED || fail "job $id did not complete after the requeue: $(tail -n 8 "$work/preempt.out")"
cat "$work/preempt.out"
grep -q "stopped by SIGUSR1 after step" "$work/preempt.out" || fail "the ranks did not stop on SIGUSR1"
grep -q "requeueing job $id" "$work/preempt.out" || fail "the script did not requeue the job"
[[ $(scontrol show job "$id" | grep -o 'Restarts=[0-9]*') == Restarts=1 ]] || fail "job $id was not restarted once"
same_file "$work/preempt.safetensors" "$work/mpirun.safetensors" "preempted and requeued against uninterrupted"

echo "--- a plain scancel (SIGTERM to every process of the job) under mpirun, then submitted again"
# mpirun's daemons kill the ranks 2 x odls_base_sigkill_timeout after SIGTERM (the script's
# default 10 s): 5 s keeps the test short; the ranks stop well within it.
id=$(OMPI_MCA_odls_base_sigkill_timeout=5 DTRAIN_CHECKPOINT_DIR="$work/term-ckpt" sbatch --parsable --nodes 2 \
     --ntasks-per-node 2 --cpus-per-task 1 --output "$work/term.out" "$job" "${train[@]}" --max-steps $steps \
     --log-every 1 --metrics "$work/term.jsonl") || fail "sbatch (scancel)"
wait_progress "$work/term.jsonl" || fail "job $id made no progress within 5 minutes: $(tail -n 5 "$work/term.out")"
scancel "$id" || fail "scancel $id"
for ((i = 0; i < 240; ++i)); do [[ -z "$(squeue -h -j "$id" 2>/dev/null)" ]] && break; sleep 0.5; done
cat "$work/term.out"
grep -q "stopped by SIGTERM after step [0-9]*: checkpoint $work/term-ckpt/step-" "$work/term.out" ||
  fail "the ranks did not stop on SIGTERM with a checkpoint"
[[ $(scontrol show job "$id" | grep -o 'ExitCode=[0-9:]*') == ExitCode=143:0 ]] ||
  fail "job $id did not exit 143: $(scontrol show job "$id" | grep -o 'JobState=[A-Z]* .*ExitCode=[0-9:]*')"
id=$(DTRAIN_CHECKPOINT_DIR="$work/term-ckpt" sbatch --parsable --nodes 2 --ntasks-per-node 2 --cpus-per-task 1 \
     --output "$work/term2.out" "$job" "${train[@]}" --max-steps $steps --save "$work/term.safetensors") ||
  fail "sbatch (after scancel)"
wait_state "$id" COMPLETED || fail "job $id did not complete from the checkpoint: $(tail -n 8 "$work/term2.out")"
grep -q "resumed from $work/term-ckpt/step-" "$work/term2.out" || fail "job $id did not resume: $(head -n 5 "$work/term2.out")"
same_file "$work/term.safetensors" "$work/mpirun.safetensors" "cancelled and submitted again against uninterrupted"
echo "--- dtrain plan --write-sbatch, the script as written"
printf '[data]\nname = "synthetic"\nsynthetic_size = 2048\n\n[training]\nmax_steps = 5\n\n[logging]\nprogress = "off"\n' \
  > "$work/base.toml"
"$dtrain" plan --model mlp --global-batch 128 --hosts 2 --ranks-per-host 2 --machine "$machine" \
  --config "$work/base.toml" --top 1 --write-sbatch "$work/plan.sbatch" > "$work/plan.txt" ||
  fail "dtrain plan --write-sbatch: $(tail -n 3 "$work/plan.txt")"
grep -q '^#SBATCH --nodes=2$' "$work/plan.sbatch" && grep -q '^#SBATCH --ntasks-per-node=2$' "$work/plan.sbatch" ||
  fail "the written script does not ask for 2 nodes x 2 tasks: $(grep SBATCH "$work/plan.sbatch")"
chosen=$(grep -o '^strategy = "[a-z-]*"' "$work/plan.sbatch" | cut -d'"' -f2)
id=$(sbatch --parsable --output "$work/plan.out" "$work/plan.sbatch") || fail "sbatch the written script"
wait_state "$id" COMPLETED || fail "the written script's job $id did not complete: $(tail -n 5 "$work/plan.out")"
got=$(result "$work/plan.out")
[[ $(field "$got" workers) == 4 && $(field "$got" strategy) == "\"$chosen\"" && $(field "$got" steps) == 5 ]] ||
  fail "the written script did not train the plan's $chosen on 4 workers for 5 steps: $got"

echo "--- a node lost mid-job (its slurmd and processes killed): one line naming it, the nodes left go on"
id=$(sbatch --parsable --nodes 2 --ntasks-per-node 2 --cpus-per-task 1 \
     --output "$work/lost.out" "$job" "${train[@]}" --max-steps $steps --checkpoint-every 10 \
     --save "$work/lost.safetensors") || fail "sbatch (lost node)"
first="$work/dtrain-ckpt-$id/step-000000010.safetensors"
for ((i = 0; i < 1200; ++i)); do [[ -e "$first" ]] && break; sleep 0.25; done
[[ -e "$first" ]] || fail "job $id wrote no checkpoint within 5 minutes: $(tail -n 5 "$work/lost.out")"
bash "$netsim" kill 1  # every process in host 1's namespace: its slurmd, orted and ranks
lost="dtrain${DTRAIN_NETSIM_ID}-h1"
# Done once the result line is out: the job then stays COMPLETING until SLURM marks the
# dead node down (SlurmdTimeout), which is SLURM's business, not the job's.
for ((i = 0; i < 1200; ++i)); do
  st=$(scontrol show job "$id" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2)
  [[ "$st" == COMPLETED || ("$st" == COMPLETING && -n "$(result "$work/lost.out")") ]] && break
  [[ "$st" == FAILED || "$st" == CANCELLED ]] && break
  sleep 0.25
done
[[ "$st" == COMPLETED || "$st" == COMPLETING ]] ||
  fail "job $id did not complete on the node left ($st): $(tail -n 8 "$work/lost.out")"
cat "$work/lost.out"
[[ $(grep -c "^dtrain: node $lost lost (it does not answer): going on from the last checkpoint on dtrain${DTRAIN_NETSIM_ID}-h0:2$" \
     "$work/lost.out") == 1 ]] || fail "no one line naming the lost node $lost"
# (Not the result line: mpirun may cut it with the ranks' other output, as it did once here.)
grep -q "the checkpoint was taken by 4 workers, this run has 2" "$work/lost.out" ||
  fail "the nodes left did not resume the 4 workers' checkpoint"
grep -q "dtrain: mlp, $steps steps" "$work/lost.out" && [[ -e "$work/dtrain-ckpt-$id/step-0000000$steps.safetensors" ]] ||
  fail "the job did not finish its $steps steps on the node left"

echo "slurm test passed"
