#!/usr/bin/env python3
"""The Kubernetes manifests of deploy/kubernetes (issue 57), checked for the
structure their operators read (no schema checker for these CRDs is packaged in
Debian): every pod runs as uid 1000; the launcher's command is mpirun of
`dtrain train --backend mpi` with as many --workers as the job has ranks,
`--resume auto` and a --checkpoint-dir on the volume that every rank's pod
mounts, claimed by checkpoints-pvc.yaml. Then, with DTRAIN_BIN, that exact dtrain
command runs under mpirun on this machine (the volume a temporary directory, a
few steps), twice: the second run resumes from the first one's checkpoint.
    check_manifests.py DEPLOY_DIR [DTRAIN_BIN]"""
import glob
import os
import subprocess
import sys
import tempfile

import yaml


def fail(message):
    sys.exit("check_manifests: " + message)


def load(folder):
    docs = {}
    for path in sorted(glob.glob(os.path.join(folder, "*.yaml"))):
        with open(path) as f:
            for doc in yaml.safe_load_all(f):
                for key in ("apiVersion", "kind", "metadata"):
                    if key not in doc:
                        fail("%s: a document without %s" % (path, key))
                docs[(doc["kind"], doc["metadata"]["name"])] = doc
    return docs


def flag(command, name):
    if name not in command:
        fail("%s missing from %s" % (name, command))
    return command[command.index(name) + 1]


def checkPod(pod, where):
    if pod.get("securityContext", {}).get("runAsUser") != 1000:
        fail(where + ": the pod does not run as uid 1000")


def checkCommand(command, ranks, where):
    if command[0] != "mpirun" or "dtrain" not in command:
        fail(where + ": the command is not mpirun ... dtrain: %s" % command)
    train = command[command.index("dtrain"):]
    if train[1] != "train" or flag(train, "--backend") != "mpi" or flag(train, "--resume") != "auto":
        fail(where + ": not dtrain train --backend mpi --resume auto: %s" % train)
    if int(flag(train, "--workers")) != ranks:
        fail(where + ": --workers %s for %d ranks" % (flag(train, "--workers"), ranks))
    return train


def checkVolume(pod, checkpointDir, claims, where):
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    for container in pod["containers"]:
        for mount in container.get("volumeMounts", []):
            claim = volumes.get(mount["name"], {}).get("persistentVolumeClaim", {}).get("claimName")
            if checkpointDir.startswith(mount["mountPath"] + "/") and claim in claims:
                return mount["mountPath"]
    fail(where + ": no claimed volume (%s) holds --checkpoint-dir %s" % (sorted(claims), checkpointDir))


def checkMpiJob(job, claims):
    specs = job["spec"]["mpiReplicaSpecs"]
    launcher, worker = specs["Launcher"]["template"]["spec"], specs["Worker"]["template"]["spec"]
    checkPod(launcher, "MPIJob launcher")
    checkPod(worker, "MPIJob worker")
    ranks = specs["Worker"]["replicas"] * job["spec"].get("slotsPerWorker", 1)
    container = launcher["containers"][0]
    train = checkCommand(container["command"], ranks, "MPIJob")
    mount = checkVolume(worker, flag(train, "--checkpoint-dir"), claims, "MPIJob worker")
    return container["command"], container.get("env", []), ranks, mount


def checkTrainJob(job, runtimes, claims):
    ref = job["spec"]["runtimeRef"]
    runtime = runtimes.get(ref["name"])
    if runtime is None or ref.get("kind", "ClusterTrainingRuntime") != "TrainingRuntime":
        fail("TrainJob: runtimeRef %s is not a TrainingRuntime of this folder" % ref)
    mpi = runtime["spec"]["mlPolicy"]["mpi"]
    trainer = job["spec"]["trainer"]
    ranks = trainer.get("numNodes", runtime["spec"]["mlPolicy"]["numNodes"]) * mpi["numProcPerNode"]
    for replicated in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        checkPod(replicated["template"]["spec"]["template"]["spec"], "TrainingRuntime " + replicated["name"])
    train = checkCommand(trainer["command"], ranks, "TrainJob")
    node = {"volumes": [], "containers": []}
    for override in job["spec"].get("podTemplateOverrides", []):
        if {"name": "node"} in override["targetJobs"]:
            node["volumes"] += override["spec"].get("volumes", [])
            node["containers"] += override["spec"].get("containers", [])
    mount = checkVolume(node, flag(train, "--checkpoint-dir"), claims, "TrainJob node")
    return trainer["command"], trainer.get("env", []), ranks, mount


def runHere(dtrain, command, env, ranks, mount, name):
    """The manifest's dtrain command under mpirun here, the volume a temporary
    directory, 3 steps and then 3 more resumed from its checkpoint."""
    with tempfile.TemporaryDirectory() as run:
        train = [a.replace(mount, run) for a in command[command.index("dtrain") + 1:]]
        environment = dict(os.environ, **{e["name"]: e["value"] for e in env})
        mpirun = ["mpirun", "-np", str(ranks), "--oversubscribe", "--bind-to", "none", dtrain]
        for steps, expected in (("3", "step-000000003"), ("6", "step-000000006")):
            out = subprocess.run(mpirun + train + ["--max-steps", steps], env=environment,
                                 capture_output=True, text=True, timeout=300)
            if out.returncode != 0:
                fail("%s's command, run here: exit %d: %s" % (name, out.returncode, out.stderr[-2000:]))
            saved = os.listdir(os.path.join(run, "checkpoints"))
            if expected + ".safetensors" not in saved:
                fail("%s's command, run here: no %s in %s" % (name, expected, saved))
        if "resumed from" not in out.stdout + out.stderr or " at step 3" not in out.stdout + out.stderr:
            fail("%s's command, run here: the second run did not resume: %s" % (name, out.stdout[-1000:]))
        print("check_manifests: %s's command ran here on %d ranks, and resumed" % (name, ranks))


def main():
    docs = load(sys.argv[1])
    claims = {name for kind, name in docs if kind == "PersistentVolumeClaim"}
    runtimes = {name: d for (kind, name), d in docs.items() if kind == "TrainingRuntime"}
    jobs = {"MPIJob": checkMpiJob, "TrainJob": lambda job, c: checkTrainJob(job, runtimes, c)}
    checked, ran = [], []
    for (kind, name), doc in docs.items():
        if kind in jobs:
            command, env, ranks, mount = jobs[kind](doc, claims)
            checked.append(kind)
            # Each distinct command once (the two jobs run the same one).
            if len(sys.argv) > 2 and (command, env, ranks, mount) not in ran:
                runHere(sys.argv[2], command, env, ranks, mount, kind)
                ran.append((command, env, ranks, mount))
    if sorted(checked) != sorted(jobs):
        fail("expected an MPIJob and a TrainJob, checked %s" % checked)
    print("check_manifests: %s checked" % " and ".join(checked))


main()
