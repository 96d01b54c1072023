#!/usr/bin/env python3
"""Runs the CPU-only CI template of docs/guide/testing-without-a-gpu.md, the
one a reader copies, so that it cannot go stale.

    run_ci_template.py GUIDE --source CUDYN_SOURCE --project PROJECT_DIR
                       --prefix PREFIX --build CUDYN_BUILD_DIR

GUIDE holds two ```yaml blocks: GitHub Actions (the first) and GitLab CI (the
second). This script
  1. checks that both run the same commands with the same environment (the
     GitLab one has no step of its own: before_script, then script);
  2. runs the GitHub job's steps in order, as a runner would, each with
     `bash -e -c`: in PROJECT_DIR, where the template's `cudyn/` folder is a
     link to CUDYN_SOURCE; `/opt/cudyn` becomes PREFIX and `/tmp/cudyn-build`
     CUDYN_BUILD_DIR. Steps that only check out (`uses:`) or install the
     distribution's tools (apt-get) are not run: CI has those already.
Every step's environment is this process's plus the step's `env:`, nothing
more: the template's `cudyn-info` step runs with no LD_LIBRARY_PATH, as it
does on a real runner.
Exit 0 when both checks pass and every step succeeded; 1 otherwise.
"""
import argparse
import os
import re
import subprocess
import sys

import yaml


def yaml_blocks(text):
    return [yaml.safe_load(m.group(1)) for m in re.finditer(r"^```yaml\n(.*?)^```", text, re.M | re.S)]


def commands(script):
    """The shell commands of a step, with continuation lines joined."""
    joined = re.sub(r"\\\n\s*", "", script.strip())
    return [re.sub(r"\s+#.*$", "", line).strip() for line in joined.splitlines() if line.strip()]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("guide")
    parser.add_argument("--source", required=True)
    parser.add_argument("--project", required=True)
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--build", required=True)
    # Appended to the template's `meson setup` of cudyn: CI passes
    # -Dpython=disabled, since the Python package is built and tested in the
    # first stage and would only add minutes here.
    parser.add_argument("--extra-setup-option", action="append", default=[])
    args = parser.parse_args()

    with open(args.guide) as f:
        blocks = yaml_blocks(f.read())
    if len(blocks) != 2:
        print(f"{args.guide}: {len(blocks)} yaml blocks, expected 2 (GitHub Actions, GitLab CI)")
        return 1
    github, gitlab = blocks
    (job,) = github["jobs"].values()
    (gitlab_job,) = gitlab.values()

    steps = [s for s in job["steps"] if "run" in s]
    run_steps = [s for s in steps if "apt-get" not in s["run"]]
    github_commands = [c for s in steps for c in commands(s["run"])]
    gitlab_commands = [c for key in ("before_script", "script") for c in gitlab_job.get(key, [])]
    gitlab_commands = [c for line in gitlab_commands for c in commands(line)]
    problems = []
    if github_commands != gitlab_commands:
        problems.append("the GitHub and GitLab templates run different commands:\n  GitHub: " +
                        "\n          ".join(github_commands) + "\n  GitLab: " + "\n          ".join(gitlab_commands))
    github_env = {}
    for s in steps:
        github_env.update(s.get("env", {}))
    gitlab_env = {k: v for k, v in gitlab_job.get("variables", {}).items() if not k.startswith("GIT_")}
    if github_env != gitlab_env:
        problems.append(f"the templates' environments differ: GitHub {github_env}, GitLab {gitlab_env}")
    for p in problems:
        print(f"ci template: {p}")
    if problems:
        return 1

    link = os.path.join(args.project, "cudyn")
    if not os.path.lexists(link):
        os.symlink(os.path.abspath(args.source), link)

    def local(text):
        text = str(text).replace("/opt/cudyn", args.prefix)
        if args.extra_setup_option:
            # After the source folder: Meson takes no option between its two folders.
            text = re.sub(r"(meson setup /tmp/cudyn-build \S+)", lambda m: m.group(1) + " " + " ".join(args.extra_setup_option), text)
        return text.replace("/tmp/cudyn-build", args.build)

    for step in run_steps:
        env = dict(os.environ)
        env.update({k: local(v) for k, v in step.get("env", {}).items()})
        print(f"=== ci template: {step.get('name', '(unnamed step)')}", flush=True)
        done = subprocess.run(["bash", "-e", "-c", local(step["run"])], cwd=args.project, env=env)
        if done.returncode != 0:
            print(f"ci template: step '{step.get('name')}' failed (exit {done.returncode})")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
