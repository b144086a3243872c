"""Build hook (hatchling, build time only): the editable install's package-dir mapping.

A wheel gets ``bias_harness/tasks`` etc. from ``[tool.hatch.build.targets.wheel.sources]``. Hatchling's own
editable modes cannot express that mapping (they only add folders to ``sys.path``), so the editable wheel gets
one more .pth line that maps each import name to its checkout folder, read from the same ``sources`` table:
``_bias_harness_autoload.map_packages({...})``. The start-up hook files are copied as in a wheel (pip then
byte-compiles the module, which matters where PYTHONDONTWRITEBYTECODE is set).
"""

from __future__ import annotations

from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

PTH = "_bias_harness_editable.pth"  # sorts after hatchling's _bias_harness.pth (autoload/ on sys.path) and before ours


class EditableMapping(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict) -> None:
        if version != "editable":
            return
        root = Path(self.root).resolve()
        sources = self.build_config.target_config.get("sources", {})
        mapping = {"bias_harness": str(root / "bias_harness")}
        for folder, target in sources.items():
            mapping[target.strip("/").replace("/", ".")] = str(root / folder.strip("/"))
        out = Path(self.directory) / "editable-pth"
        out.mkdir(parents=True, exist_ok=True)
        (out / PTH).write_text(f"import _bias_harness_autoload; _bias_harness_autoload.map_packages({mapping!r})\n")
        # force_include_editable replaces force-include for this build: keep the start-up hook in it
        force = self.build_config.target_config.get("force-include", {})
        build_data["force_include_editable"] = {
            **{str(root / src): dst for src, dst in force.items()},
            str(out / PTH): PTH,
        }
