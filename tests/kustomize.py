"""Just enough of `kubectl kustomize` to render deploy/kubernetes in the tests without a
kubectl binary: `resources` (files and folders), `namespace`, `images`, and inline JSON 6902
`patches` targeted by kind and name — the features the shipped kustomizations use. Anything
else in a kustomization fails loudly instead of rendering something kubectl would not."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from sandbox.kubernetes import json_patch

SUPPORTED = {"apiVersion", "kind", "resources", "namespace", "images", "patches"}
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding"}


def render(folder: Path) -> list[dict[str, Any]]:
    spec = yaml.safe_load((folder / "kustomization.yaml").read_text())
    unsupported = set(spec) - SUPPORTED
    if unsupported:
        raise ValueError(f"{folder}: this renderer does not support {sorted(unsupported)}")
    objects: list[dict[str, Any]] = []
    for entry in spec.get("resources", []):
        path = folder / entry
        if path.is_dir():
            objects += render(path)
        else:
            objects += [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    objects = copy.deepcopy(objects)
    for obj in objects:
        if "namespace" in spec and obj["kind"] not in CLUSTER_SCOPED:
            obj["metadata"]["namespace"] = spec["namespace"]
        for image in spec.get("images", []):
            _set_image(obj, image)
    for patch in spec.get("patches", []):
        target = patch["target"]
        matched = [
            i
            for i, obj in enumerate(objects)
            if obj["kind"] == target["kind"] and obj["metadata"]["name"] == target["name"]
        ]
        if not matched:
            raise ValueError(f"{folder}: patch target {target} matches nothing")
        for i in matched:
            objects[i] = json_patch(objects[i], yaml.safe_load(patch["patch"]))
    return objects


def _set_image(obj: dict[str, Any], image: dict[str, str]) -> None:
    pod = obj.get("spec", {}).get("template", {}).get("spec", {})
    for container in pod.get("containers", []):
        name, _, tag = container["image"].partition(":")
        if name == image["name"]:
            tag = image.get("newTag", tag)
            new = image.get("newName", name)
            container["image"] = f"{new}:{tag}" if tag else new
