"""Print the requirements that pyproject.toml lists, for pip, without installing the project.

`requirements.py worker,dev` prints, one per line, the dependencies plus those extras; `--no-deps` prints the
packages to install without their own dependencies ([tool.foley] no_deps), whose published
pins conflict with the rest.
"""

import sys
import tomllib
from pathlib import Path

project = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())
if sys.argv[1:] == ["--no-deps"]:
    print("\n".join(project.get("tool", {}).get("foley", {}).get("no_deps", [])))
else:
    extras = [e for e in (sys.argv[1] if len(sys.argv) > 1 else "").split(",") if e]
    reqs = list(project["project"]["dependencies"])
    for extra in extras:
        reqs += project["project"]["optional-dependencies"][extra]
    print("\n".join(reqs))
