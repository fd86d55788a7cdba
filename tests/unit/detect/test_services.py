"""ServicesDetector: commands that need a daemon, a cluster or the network."""

from __future__ import annotations

from reprobridge.detect import detect_repo
from reprobridge.detect.index import RepoIndex
from reprobridge.detect.procedure.services import command_tools
from reprobridge.detect.registry import detectors


def test_command_words_not_arguments() -> None:
    assert command_tools("docker build -t x . && kubectl apply -f a.yaml") == ["docker", "kubectl"]
    assert command_tools("FOO=1 sudo /usr/bin/wget https://x/y | tar x") == ["wget"]
    assert command_tools("python train.py --out docker_logs  # uses curl later") == []
    assert command_tools("echo 'ssh is not run here'") == []
    assert command_tools("  # docker run x") == []


def test_makefile_only_the_target_recipe_counts(make_repo) -> None:
    root = make_repo(
        {
            "Makefile": (
                "train:\n\tpython train.py\n\nimage:\n\tdocker build -t x .\n\n"
                "fetch:\n\twget https://example.org/data.zip\n"
            ),
            "README.md": "```bash\nmake train\nmake fetch\n```\n",
            "train.py": "print('loss: 1.0')\n",
        },
        git=False,
    )
    ctx = detect_repo(
        RepoIndex.from_directory(root), only=detectors({"readme", "makefile", "services"})
    )
    services = [f for f in ctx.findings if f.kind == "service"]
    # make train runs python only; make fetch downloads; the image target is nobody's recipe
    assert [(f.key, f.value.tools, f.sources()) for f in services] == [
        ("Makefile::fetch", ("wget",), ["Makefile:8"])
    ]


def test_a_command_needing_a_service_does_not_mark_others_running_its_script(make_repo) -> None:
    """``srun python train.py`` needs a cluster; ``python train.py`` beside it in the README
    does not (held-out cleanrl: one srun line marked every ppo.py command)."""
    root = make_repo(
        {
            "README.md": (
                "```bash\npython train.py --steps 10\n```\n\n"
                "```bash\nsrun python train.py --steps 99\n```\n"
            ),
            "train.py": "print('loss: 1.0')\n",
        },
        git=False,
    )
    ctx = detect_repo(RepoIndex.from_directory(root), only=detectors({"readme", "services"}))
    keys = [f.key for f in ctx.findings if f.kind == "service"]
    assert keys == ["srun python train.py --steps 99"], keys


def test_make_target_of_a_subdirectory_and_recipe_variables(make_repo) -> None:
    """``make -C sub fetch`` runs sub/Makefile's ``fetch`` (not a target named ``sub``), and
    its recipe is read as make expands it (``$(DL)`` is wget)."""
    root = make_repo(
        {
            "sub/Makefile": (
                "DL = wget\n\ntrain:\n\tpython train.py\n\n"
                "fetch:\n\t$(DL) https://example.org/data.zip && python train.py\n"
            ),
            "sub/train.py": "print('loss: 1.0')\n",
        },
        git=False,
    )
    ctx = detect_repo(RepoIndex.from_directory(root), only=detectors({"makefile", "services"}))
    exps = sorted(f.value.command for f in ctx.findings if f.kind == "experiment")
    assert exps == ["make -C sub fetch", "make -C sub train"], exps
    services = [(f.key, f.value.tools) for f in ctx.findings if f.kind == "service"]
    assert services == [("sub/Makefile::fetch", ("wget",))], services
