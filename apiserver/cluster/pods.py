"""The plugin's Pods, for the NodeModelStore status guard's rule 3 when a token carries no
node-name extra (kube before 1.30). RBAC: get pods in the plugin namespace."""

from __future__ import annotations

from lightkube.resources.core_v1 import Pod

import kube
from apiserver.admission import facts
from apiserver.cluster import reviews


class Pods:
    def __init__(self, client: kube.Client) -> None:
        self.client = client

    async def pod(self, namespace: str, name: str) -> facts.PodFacts | None:
        try:
            found = await self.client.get(Pod, name, namespace=namespace)
        except kube.NotFound:
            return None
        except kube.KubeError as exc:
            raise reviews.unavailable(exc) from None
        metadata, spec = found.metadata, found.spec
        return facts.PodFacts(uid=(metadata.uid if metadata else None) or "",
                               node_name=(spec.nodeName if spec else None) or "")
