"""The one source of truth: structural OpenAPI v3 schemas of every kind in worker.gpustack.ai/v1.

Defaulting, pruning, validation, printer columns and both OpenAPI documents are derived from the
dicts built here; nothing restates a field elsewhere. References use the v3 form
(``#/components/schemas/<name>``) and resolve through ``DEFINITIONS``.
"""

from __future__ import annotations

from typing import Any

from openapi import anchors, grammar, meta, reasons, resources, sources, states

Schema = dict[str, Any]

# Limits shared with admission and the docs.
MAX_PATTERNS = 32
MAX_PATTERN_LENGTH = 256
MAX_REPOSITORY_LENGTH = grammar.REPOSITORY_MAX
MAX_REVISION_LENGTH = grammar.REVISION_MAX
MAX_CLAIM_PATH_LENGTH = 4096
MAX_IMAGE_REFERENCE_LENGTH = 4096
MAX_PINNED = 256
MAX_MODELS = 256
MAX_MESSAGE_LENGTH = 32768
MAX_TARGET_NODES = 256
MAX_SELECTOR_LABELS = 64
MAX_PREFETCH_NODES = 256
PREFETCH_PHASES = states.PHASES
MAX_PEER_URL_LENGTH = 280
# https://HOST:PORT of a plugin's peer port: an IPv4 address or DNS name, or [IPv6]; no path,
# query or credentials, so a listing names nothing but where to connect.
PEER_URL_PATTERN = (r"^https://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?)"
                    r":[0-9]{1,5}$")
PEER_URL_RULE = "must be https://HOST:PORT (an IP address, [IPv6 address] or DNS name, no path)"
MAX_EVICT = 64


def _operations(where: str) -> Schema:
    """The operator's switches on a pool (issue 39), copied into each node's spec while in force."""
    return {
        "type": "object",
        "description": f"Operator switches {where}, in force while set.",
        "properties": {
            "pauseCollection": {"type": "boolean", "description": (
                "Hold collection: nothing is removed, not even past the high watermark or a "
                "quarantined tree, until it is unset (a plugin rollback).")},
            "rehashRequest": {"type": "string", "maxLength": 63, "description": (
                "Change it to any new value to re-hash every published tree now (after a "
                "rollback, before collection resumes); empty asks nothing.")},
            "evictDigests": {
                "type": "array", "maxItems": MAX_EVICT,
                "description": f"Digests removed from the nodes as soon as no Pod mounts them, "
                               f"pinned or not (an untrusted copy); at most {MAX_EVICT}.",
                "items": {"type": "string", "description": "A manifest digest.",
                          "pattern": grammar.DIGEST_PATTERN},
                "x-kubernetes-list-type": "set"},
        },
    }


def string(description: str, **extra: Any) -> Schema:
    return {"type": "string", "description": description, **extra}


def integer(description: str, fmt: str = "int64", **extra: Any) -> Schema:
    return {"type": "integer", "format": fmt, "description": description, **extra}


def count(description: str) -> Schema:
    return integer(description, "int32", minimum=0)


def obj(description: str, properties: dict[str, Schema], required: tuple[str, ...] = (),
        **extra: Any) -> Schema:
    schema: Schema = {"type": "object", "description": description, "properties": properties}
    if required:
        schema["required"] = list(required)
    schema.update(extra)
    return schema


def array(description: str, items: Schema, **extra: Any) -> Schema:
    return {"type": "array", "description": description, "items": items, **extra}


def time(description: str, **extra: Any) -> Schema:
    return meta.ref_with(meta.TIME, description, **extra)


def conditions(types: tuple[str, ...]) -> Schema:
    condition = obj(
        "One aspect of the object's state.",
        {
            "type": string("The aspect this condition describes.", enum=list(types)),
            "status": string("True, False or Unknown.", enum=["True", "False", "Unknown"]),
            "reason": string("A CamelCase word saying why the status is what it is.",
                             maxLength=reasons.CONDITION_REASON_MAX,
                             pattern=reasons.CONDITION_REASON_PATTERN),
            "message": string("A sentence for a human, saying what happened and what to do.",
                              maxLength=MAX_MESSAGE_LENGTH),
            "lastTransitionTime": time("When status last changed."),
            "observedGeneration": integer("The generation this condition was computed from.",
                                          minimum=0),
        },
        ("type", "status"),
    )
    return array(f"The conditions: {', '.join(types)}.", condition,
                 maxItems=len(types), **{"x-kubernetes-list-type": "map",
                                         "x-kubernetes-list-map-keys": ["type"]})


def _secret_ref() -> Schema:
    return obj(
        "A Secret in the artifact's namespace whose key `token` holds the hub token. It need "
        "not exist yet; its absence is reported in status as SecretNotFound.",
        {"name": string("The Secret's name (a DNS-1123 subdomain).", minLength=1, maxLength=253)},
        ("name",),
    )


def _hub_source(kind: sources.HubKind, example: str) -> Schema:
    hub, default_revision = sources.HUB_NAMES[kind], sources.DEFAULT_REVISIONS[kind]
    return obj(
        f"Weights from a {hub} repository, resolved once to a commit and a manifest digest.",
        {
            "repository": string(f"The repository as owner/name, e.g. {example}.",
                                 minLength=3, maxLength=MAX_REPOSITORY_LENGTH),
            "revision": string(f"A branch, tag or commit; defaults to {default_revision}.",
                               default=default_revision, minLength=1,
                               maxLength=MAX_REVISION_LENGTH),
            "secretRef": _secret_ref(),
        },
        ("repository",),
    )


def _patterns(verb: str) -> Schema:
    return array(
        f"fnmatch patterns of the files to {verb} (case-sensitive; * and ? cross '/'; a trailing "
        f"'/' means the whole directory). Hub sources only; at most {MAX_PATTERNS}.",
        string("One pattern.", minLength=1, maxLength=MAX_PATTERN_LENGTH),
        maxItems=MAX_PATTERNS,
        **{"x-kubernetes-list-type": "atomic"},
    )


MODEL_ARTIFACT_SPEC = obj(
    "Where the weights come from. Immutable after creation: other weights or another revision "
    "are a new artifact.",
    {
        "source": obj(
            "Exactly one source.",
            {
                sources.HUGGING_FACE: _hub_source(sources.HUGGING_FACE,
                                                  "Qwen/Qwen2.5-7B-Instruct"),
                sources.MODEL_SCOPE: _hub_source(sources.MODEL_SCOPE, "qwen/Qwen2.5-7B-Instruct"),
                sources.CLAIM: obj(
                    "Weights already on a claim in the artifact's namespace, mounted directly.",
                    {
                        "claimName": string("The claim's name.", minLength=1, maxLength=63),
                        "path": string("A relative directory inside the volume; empty is its "
                                       "root.", maxLength=MAX_CLAIM_PATH_LENGTH),
                    },
                    ("claimName",),
                ),
                sources.IMAGE: obj(
                    "Weights at the root of an OCI image, mounted as an image volume.",
                    {
                        "reference": string(
                            "The image reference pinned by digest (name@sha256:<64 hex>); a tag "
                            "is refused because it can change.",
                            minLength=1, maxLength=MAX_IMAGE_REFERENCE_LENGTH),
                    },
                    ("reference",),
                ),
            },
        ),
        "allowPatterns": _patterns("keep; empty keeps every file"),
        "ignorePatterns": _patterns("drop, even when allowed"),
        "expectedDigest": string(
            "The manifest digest the source must resolve to (sha256: and 64 lowercase hex). "
            "Hub sources only.", pattern=grammar.DIGEST_PATTERN),
    },
    ("source",),
)

MODEL_ARTIFACT_STATUS = obj(
    "What the worker resolved and where the content is. Written by the worker only.",
    {
        "observedGeneration": integer("The generation the worker last acted on.", minimum=0),
        "resolved": obj(
            "The resolution: the commit and the manifest digest the artifact stands for.",
            {
                "revision": string("The 40-character commit the revision resolved to.",
                                   maxLength=MAX_REVISION_LENGTH),
                "manifestDigest": string("The digest of the canonical manifest.",
                                         pattern=grammar.DIGEST_PATTERN),
                "digestSource": string("Hub: from the hub's listing; Expected: the spec's "
                                       "anchor, used after the hub stayed unreachable.",
                                       enum=list(anchors.DIGEST_SOURCES)),
                "anchorProof": string(
                    "With digestSource Expected: why the namespace may have that content. "
                    "Grant: an administrator granted the anchor (status.anchorGrant); "
                    "HubVerified: an artifact of the namespace resolved to that digest from "
                    "the hub.", enum=list(anchors.PROOFS)),
                "fileCount": integer("Files in the manifest.", minimum=0),
                "sizeBytes": integer("Total bytes of the manifest's files.", minimum=0),
                "resolvedTime": time("When the source was resolved."),
                "lastValidatedTime": time("When access was last confirmed."),
            },
        ),
        "nodes": obj(
            "Nodes reporting the digest (hub sources only), counted by the server whenever the "
            "artifact is read (GET, LIST, watch events) and never stored: a write's value is "
            "dropped, and a node's change sends no watch event (read again for the current "
            "counts). Absent until the server has read every NodeModelStore.",
            {
                "ready": count("Nodes holding the content published."),
                "downloading": count("Nodes downloading it."),
                "failed": count("Nodes waiting to retry a failed attempt."),
                "downloadingPercent": integer(
                    "The downloading nodes' mean progress, in steps of 5.", "int32",
                    minimum=0, maximum=100, multipleOf=5),
            },
        ),
        "anchorGrant": obj(
            "An administrator's grant of the anchor: recorded by the server when a user "
            f"allowed verb {anchors.VERB} on {anchors.RESOURCE} set the annotation "
            f"{anchors.ANNOTATION}, removed with it.",
            {"grantedTime": time("When the grant was given.")},
        ),
        "retryTime": time("While Resolved is not True: when the worker tries again (a Secret "
                          "change tries at once). Absent otherwise."),
        "conditions": conditions(reasons.ARTIFACT_CONDITIONS),
    },
)

NODE_MODEL_STORE_SPEC = obj(
    "This node's effective configuration, written by the worker.",
    {
        "watermarks": obj(
            "Cache usage bounds, in percent of the filesystem.",
            {
                "highPercent": integer("Collection starts above this.", "int32", minimum=2,
                                       maximum=95, default=80),
                "lowPercent": integer("Collection stops at this; below highPercent.", "int32",
                                      minimum=1, maximum=94, default=70),
            },
            default={},
        ),
        "download": obj(
            "Download limits for the whole node.",
            {
                "concurrency": integer("Requests running at once.", "int32", minimum=1,
                                       maximum=64, default=8),
                "bytesPerSecond": integer("Bandwidth cap; 0 is unlimited.", minimum=0,
                                          default=0),
            },
            default={},
        ),
        "hub": obj(
            "How the node reaches the hubs.",
            {
                "huggingFaceEndpoint": string("The Hugging Face endpoint.", maxLength=2048,
                                              default="https://huggingface.co"),
                "modelScopeEndpoint": string("The ModelScope endpoint.", maxLength=2048,
                                             default="https://www.modelscope.cn"),
                "httpsProxy": string("The HTTPS proxy, without credentials; empty for none.",
                                     maxLength=2048),
                "noProxy": string("Hosts reached without the proxy, comma-separated.",
                                  maxLength=8192),
                "caBundleConfigMap": string("A ConfigMap in the worker's namespace whose key "
                                            "ca.crt holds extra CAs; empty for none.",
                                            maxLength=253),
            },
            default={},
        ),
        "kubelet": obj(
            "The node's kubelet thresholds, read from its configz.",
            {
                "nodefsAvailable": string("evictionHard nodefs.available; empty if unset.",
                                          maxLength=64),
                "imagefsAvailable": string("evictionHard imagefs.available; empty if unset.",
                                           maxLength=64),
                "imageGCHighThresholdPercent": integer("Image GC high threshold.", "int32",
                                                       minimum=0, maximum=100),
            },
        ),
        # --- cache governance (issue 39) ---
        "store": string("The ModelStore whose pool settings are merged into this spec (the "
                        "alphabetically first of those whose selector matches the node); "
                        "empty: the cluster settings alone.", maxLength=253),
        "operations": _operations("from the winning ModelStore"),
        # --- end cache governance ---
        "pinned": array(
            "Digests never collected on this node.",
            string("A manifest digest.", pattern=grammar.DIGEST_PATTERN),
            maxItems=MAX_PINNED, **{"x-kubernetes-list-type": "set"},
        ),
        "evict": array(
            "Digests to remove now, whatever the watermarks: each goes as soon as no Pod "
            "mounts it and it is not pinned (a prefetch deleted with cleanupOnDelete). Written "
            "by the worker.",
            string("A manifest digest.", pattern=grammar.DIGEST_PATTERN),
            maxItems=MAX_PINNED, **{"x-kubernetes-list-type": "set"},
        ),
    },
    default={},
)

NODE_MODEL_STORE_STATUS = obj(
    "The node plugin's facts about its cache. Never names a tenant.",
    {
        "observedGeneration": integer("The spec generation the plugin applies.", minimum=0),
        "capacity": obj(
            "The cache filesystem.",
            {
                "totalBytes": integer("The filesystem's size.", minimum=0),
                "storedBytes": integer("Published trees and partial downloads.", minimum=0),
                "usedPercent": integer("The filesystem's usage, rounded down to a multiple of "
                                       "5.", "int32", minimum=0, maximum=100, multipleOf=5),
            },
        ),
        "models": array(
            f"Content on this node, keyed by digest; at most {MAX_MODELS} entries, referenced "
            "ones first, then the most recently used.",
            obj(
                "One digest on this node.",
                {
                    "digest": string("The manifest digest.", pattern=grammar.DIGEST_PATTERN),
                    "state": string("Where the content stands.",
                                    enum=list(states.MODEL_STATES)),
                    "sizeBytes": integer("The manifest's size, once listed.", minimum=0),
                    "downloadedBytes": integer("What the current attempt holds.", minimum=0),
                    "source": string("Where the bytes came from.", enum=list(states.ORIGINS)),
                    "referenced": {"type": "boolean", "description": "Some Pod mounts it."},
                    "lastUsedTime": time("Last use, truncated to the hour.", nullable=True),
                    "reason": string("Why it failed; empty otherwise.",
                                     enum=["", *reasons.FAILURE_REASONS]),
                    "message": string("What the reason means here, naming no tenant.",
                                      maxLength=MAX_MESSAGE_LENGTH),
                    "retryTime": time("The earliest next attempt after a failure.",
                                      nullable=True),
                },
                ("digest", "state"),
            ),
            maxItems=MAX_MODELS,
            **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["digest"]},
        ),
        "peer": obj(
            "Where the other nodes' plugins reach this one's peer port (node-to-node sync); "
            "absent while it serves none.",
            {"url": string("The peer port as https://HOST:PORT (the plugin Pod's IP).",
                           pattern=PEER_URL_PATTERN, maxLength=MAX_PEER_URL_LENGTH)},
            ("url",),
        ),
        "conditions": conditions(reasons.STORE_CONDITIONS),
    },
)


# --- cache governance (issue 39): ModelPrefetch in the upstream shape ---------------------
MAX_EXPRESSIONS = 16
SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def label_selector(description: str) -> Schema:
    """metav1.LabelSelector: matchLabels and matchExpressions, ANDed."""
    return obj(
        description,
        {
            "matchLabels": {
                "type": "object",
                "description": "Labels the node must carry with these values.",
                "additionalProperties": string("A label value.", maxLength=63),
                "maxProperties": MAX_SELECTOR_LABELS,
            },
            "matchExpressions": array(
                f"Requirements on the node's labels; at most {MAX_EXPRESSIONS}.",
                obj("One requirement.",
                    {"key": string("The label key.", minLength=1, maxLength=317),
                     "operator": string("In, NotIn, Exists or DoesNotExist.",
                                        enum=list(SELECTOR_OPERATORS)),
                     "values": array(
                         f"The values for In and NotIn (at least one); empty for Exists and "
                         f"DoesNotExist. At most {MAX_TARGET_NODES}.",
                         string("A label value.", maxLength=63),
                         maxItems=MAX_TARGET_NODES, **{"x-kubernetes-list-type": "atomic"})},
                    ("key", "operator")),
                maxItems=MAX_EXPRESSIONS, **{"x-kubernetes-list-type": "atomic"},
            ),
        },
    )


MODEL_PREFETCH_SPEC = obj(
    "Which artifact to warm under which grant, on which nodes, how many make it available, and "
    "how long the warmed copies are kept.",
    {
        "artifactRef": obj(
            "The ModelArtifact to warm, in the prefetch's namespace; fixed at creation. It "
            "must be a huggingFace or modelScope artifact.",
            {"name": string("The artifact's name.", minLength=1, maxLength=253)},
            ("name",),
        ),
        "bindingRef": obj(
            "The ModelStoreBinding in the prefetch's namespace whose budget and stores this "
            "prefetch is admitted under; required at creation, fixed once set.",
            {"name": string("The binding's name.", minLength=1, maxLength=253)},
            ("name",),
        ),
        "placement": obj(
            "The target nodes. Without nodeSelector, every node of the binding's stores. "
            "To name nodes one by one, select on kubernetes.io/hostname.",
            {
                "nodeSelector": label_selector(
                    "Nodes running the node plugin whose labels this selector matches; they "
                    "must all be nodes of the binding's stores."),
                "instanceTypes": array(
                    "Upstream's by-pool form. There is no InstanceType kind here, so admission "
                    "refuses it; use nodeSelector.",
                    string("An InstanceType's name.", maxLength=253),
                    maxItems=16, **{"x-kubernetes-list-type": "set"},
                ),
            },
            default={},
        ),
        "minReady": integer(
            "How many Ready nodes make the prefetch Available; 0 means every target node.",
            "int32", minimum=0, maximum=MAX_TARGET_NODES * 64, default=0),
        "retention": obj(
            "How long the warmed copies are kept against collection.",
            {
                "pinned": {"type": "boolean", "default": False,
                           "description": "Pin the digest on every target node while this "
                                          "prefetch exists (needs the binding's allowPinned); "
                                          "false: warm only, and let collection reclaim it "
                                          "like any unused content."},
                "ttlAfterLastUse": string(
                    "With pinned: lift a node's pin once its copy went unused this long (a "
                    "duration such as 72h, at least 1h; hour granularity, from the node's "
                    "lastUsedTime). Empty keeps the pin while the prefetch exists.",
                    maxLength=64),
                "cleanupOnDelete": {"type": "boolean",
                                    "description": "When this prefetch is deleted, remove the "
                                                   "digest from its target nodes at once "
                                                   "(each as soon as no Pod mounts it and "
                                                   "nothing pins it), instead of waiting for "
                                                   "collection."},
            },
            default={},
        ),
        "targets": obj(
            "Deprecated (the shape before the pool layer): converted on every write into "
            "placement.nodeSelector (nodeNames as kubernetes.io/hostname In ..., nodeSelector "
            "as matchLabels) and minReady, and never stored.",
            {
                "nodeNames": array(
                    f"Nodes by name; at most {MAX_TARGET_NODES}.",
                    string("A node's name.", minLength=1, maxLength=253),
                    maxItems=MAX_TARGET_NODES, **{"x-kubernetes-list-type": "set"},
                ),
                "nodeSelector": {
                    "type": "object",
                    "description": "Labels the nodes hold.",
                    "additionalProperties": string("A label value.", maxLength=63),
                    "maxProperties": MAX_SELECTOR_LABELS,
                },
                "minReady": integer("How many Ready nodes make it Available.", "int32",
                                    minimum=0, maximum=MAX_TARGET_NODES * 64),
            },
        ),
    },
    ("artifactRef",),
)

MODEL_PREFETCH_STATUS = obj(
    "What the target nodes report for the artifact's digest, as counts: the status names no "
    "node (per-node facts are on the nodes' stores). Written by the worker only.",
    {
        "observedGeneration": integer("The generation the worker last acted on.", minimum=0),
        "manifestDigest": string("The artifact's digest this prefetch warms and pins.",
                                 pattern=grammar.DIGEST_PATTERN),
        "desiredNodes": count("Target nodes the spec selects now."),
        "readyNodes": count("Target nodes holding the content published."),
        "downloadingNodes": count("Target nodes downloading it."),
        "failedNodes": count("Target nodes whose attempt failed."),
        "conditions": conditions(reasons.PREFETCH_CONDITIONS),
    },
)
# --- end ModelPrefetch ---------------------------------------------------------------------


# --- cache governance (issue 39): ModelStore and ModelStoreBinding ------------------------
MAX_STORE_REFS = 16


def _label_selector(description: str) -> Schema:
    return {"type": "object", "description": description,
            "additionalProperties": string("A label value.", maxLength=63),
            "maxProperties": MAX_SELECTOR_LABELS}


MODEL_STORE_SPEC = obj(
    "One node pool's cache policy: the nodes it selects, and the watermarks and download limits "
    "that override the cluster settings on them. A field left out keeps the cluster setting.",
    {
        "nodeSelector": _label_selector(
            "The pool: nodes whose labels hold every one of these pairs ({} selects every "
            "node). A node two stores select goes to the alphabetically first name, and both "
            "report SelectorOverlap."),
        "watermarks": obj(
            "Collection thresholds, percent of the cache filesystem; each overrides the cluster "
            "setting on the pool's nodes.",
            {
                "highPercent": integer("Collection starts above this.", "int32", minimum=2,
                                       maximum=95),
                "lowPercent": integer("Collection stops at this; below highPercent.", "int32",
                                      minimum=1, maximum=94),
            },
        ),
        "download": obj(
            "Download limits per node of the pool; each overrides the cluster setting.",
            {
                "concurrency": integer("Requests running at once.", "int32", minimum=1,
                                       maximum=64),
                "bytesPerSecond": integer("Bandwidth cap per node; an explicit 0 is unlimited "
                                          "on this pool.", minimum=0),
            },
        ),
        "operations": _operations("on the pool's nodes (their NodeModelStore spec shows them)"),
    },
    ("nodeSelector",),
)

MODEL_STORE_STATUS = obj(
    "What the worker found for this pool. Written by the worker only.",
    {
        "observedGeneration": integer("The generation the worker last merged.", minimum=0),
        "nodes": count("Nodes running the node plugin this store wins."),
        "conditions": conditions(reasons.MODEL_STORE_CONDITIONS),
    },
)

MODEL_STORE_BINDING_SPEC = obj(
    "A namespace's grant: a byte budget over named ModelStores and the right to pin. Frozen: "
    "storeRefs cannot change, quota.bytes only grows, allowPinned only turns on.",
    {
        "storeRefs": array(
            f"The ModelStores (pools) whose nodes this namespace may warm; at most "
            f"{MAX_STORE_REFS}. Fixed at creation.",
            obj("One ModelStore.",
                {"name": string("The ModelStore's name.", minLength=1, maxLength=253)},
                ("name",)),
            minItems=1, maxItems=MAX_STORE_REFS,
            **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
        ),
        "quota": obj(
            "The budget.",
            {"bytes": integer("Bytes the namespace's prefetches may hold across the stores' "
                              "nodes: each distinct digest at its full size per node holding "
                              "it. Can only grow.", minimum=0)},
            ("bytes",),
        ),
        "allowPinned": {"type": "boolean", "default": False,
                        "description": "Whether the namespace's prefetches may pin their "
                                       "content against collection. Can only turn on."},
    },
    ("storeRefs", "quota"),
)

MODEL_STORE_BINDING_STATUS = obj(
    "The namespace's measured footprint. Written by the worker only.",
    {
        "observedGeneration": integer("The generation the worker last counted.", minimum=0),
        "usedBytes": integer("Each distinct digest the namespace's prefetches name, at its full "
                             "size, for every node of the bound stores holding it; absent "
                             "while a referenced artifact has not resolved (not measured).",
                             minimum=0),
        "conditions": conditions(reasons.BINDING_CONDITIONS),
    },
)
# --- end cache governance ------------------------------------------------------------------


def _kind(info: resources.ResourceInfo, description: str, body: dict[str, Schema],
          required: tuple[str, ...] = ()) -> Schema:
    properties: dict[str, Schema] = {
        "apiVersion": string(f"{info.group_version}."),
        "kind": string(f"{info.kind}."),
        "metadata": meta.ref_with(meta.OBJECT_META, "Standard object metadata.", default={}),
        **body,
    }
    schema = obj(description, properties, required)
    schema["x-kubernetes-group-version-kind"] = [
        {"group": info.group, "kind": info.kind, "version": info.version}]
    return schema


DESCRIBED = {
    resources.MODEL_ARTIFACT.kind:
        "Where a model's weights come from and which credential reads them; resolved once to a "
        "content digest.",
    resources.NODE_MODEL_STORE.kind:
        "One node's model cache: its configuration (spec, by the worker) and its content "
        "(status, by the node plugin).",
    resources.MODEL_PREFETCH.kind:
        "A tenant's intent to have one artifact downloaded on a set of nodes ahead of use, and "
        "kept there (pinned) while it exists.",
    resources.MODEL_STORE.kind:
        "A node pool's cache policy: watermarks and download limits merged over the cluster "
        "settings into the NodeModelStore spec of every node its selector matches.",
    resources.MODEL_STORE_BINDING.kind:
        "A namespace's byte budget and its right to pin, over named ModelStores; created by an "
        "administrator.",
}
"""Each stored kind's description, the first line of its OpenAPI schema and of kubectl
explain."""


def _stored(info: resources.ResourceInfo, spec: Schema, status: Schema,
            required: tuple[str, ...] = ("spec",)) -> Schema:
    """A stored kind: spec and status (``spec`` required unless said otherwise)."""
    return _kind(info, DESCRIBED[info.kind], {"spec": spec, "status": status}, required)


MODEL_ARTIFACT = _stored(resources.MODEL_ARTIFACT, MODEL_ARTIFACT_SPEC, MODEL_ARTIFACT_STATUS)
NODE_MODEL_STORE = _stored(resources.NODE_MODEL_STORE, NODE_MODEL_STORE_SPEC,
                           NODE_MODEL_STORE_STATUS, required=())
MODEL_PREFETCH = _stored(resources.MODEL_PREFETCH, MODEL_PREFETCH_SPEC, MODEL_PREFETCH_STATUS)

# --- cache governance (issue 39) ---
MODEL_STORE = _stored(resources.MODEL_STORE, MODEL_STORE_SPEC, MODEL_STORE_STATUS)
MODEL_STORE_BINDING = _stored(resources.MODEL_STORE_BINDING, MODEL_STORE_BINDING_SPEC,
                              MODEL_STORE_BINDING_STATUS)
# --- end cache governance ---

def _computed(info: resources.ResourceInfo, description: str, body: dict[str, Schema]) -> Schema:
    """A kind computed on each request from an artifact's digest: when, which digest, its size,
    then ``body``."""
    return _kind(info, description, {
        "timestamp": time("When it was computed."),
        "manifestDigest": string("The artifact's manifest digest.",
                                 pattern=grammar.DIGEST_PATTERN),
        "sizeBytes": integer("The manifest's size.", minimum=0),
        **body,
    })


MODEL_ARTIFACT_PROGRESS = _computed(
    resources.MODEL_ARTIFACT_PROGRESS,
    "An artifact's download progress across nodes, computed on each request and never stored. "
    "Names no node.",
    {
        "ready": count("Nodes holding the content published."),
        "downloading": count("Nodes downloading it."),
        "failed": count("Nodes waiting to retry a failed attempt."),
        "downloadingPercent": integer("The downloading nodes' mean, whole percent; absent when "
                                      "none downloads.", "int32", minimum=0, maximum=100),
        "downloadingBytes": integer("What the downloading nodes hold, summed.", minimum=0),
        "live": count("Downloading nodes read from their plugin for this answer."),
        "failureReasons": array(
            "How many failed nodes gave each reason.",
            obj("One reason and its count.",
                {"reason": string("A failure reason.", enum=list(reasons.FAILURE_REASONS)),
                 "count": count("Nodes with that reason.")},
                ("reason", "count")),
            **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["reason"]},
        ),
        "reason": string("Why there is nothing to count: not resolved yet, or a claim source."),
    },
)

MODEL_ARTIFACT_COPIES = _computed(
    resources.MODEL_ARTIFACT_COPIES,
    "Where an artifact's content is, node by node, computed on each request and never stored: "
    "every node that holds, downloads or failed on its digest, or that a prefetch of the "
    "artifact targets. Names nodes, so it has its own grant (get on modelartifacts/copies).",
    {
        "live": count("Downloading nodes read from their plugin for this answer."),
        "nodes": array(
            "One row per node, by name.",
            obj("One node's copy of the digest.", {
                "node": string("The node's name."),
                "phase": string("Pending (a prefetch target not started or not reported), "
                                "Downloading, Ready or Failed.", enum=list(states.PHASES)),
                "downloadedBytes": integer("What the node holds of it: live from its plugin "
                                           "when live is true, else as last stored.",
                                           minimum=0),
                "live": {"type": "boolean", "description": "downloadedBytes was read from "
                         "the node's plugin for this answer."},
                "sizeBytes": integer("The manifest's size.", minimum=0),
                "percent": integer("downloadedBytes of sizeBytes, whole percent.", "int32",
                                   minimum=0, maximum=100),
                "source": string("Where the bytes came from.", enum=list(states.ORIGINS)),
                "reason": string("Why it failed, or why a target has not started."),
                "message": string("The node's or the prefetch's words."),
                "retryTime": time("The earliest next attempt after a failure."),
                "referenced": {"type": "boolean",
                               "description": "A Pod on the node mounts it."},
                "pinned": {"type": "boolean",
                           "description": "The node keeps it against collection."},
                "lastUsedTime": time("Last use, truncated to the hour."),
                "prefetches": array("The artifact's prefetches targeting the node.",
                                    string("A ModelPrefetch's name.")),
            }, ("node", "phase")),
            **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["node"]},
        ),
        "reason": string("Why there is nothing to list: not resolved yet, or a claim or image "
                         "source."),
    },
)

MODEL_ARTIFACT_MANIFEST = _kind(
    resources.MODEL_ARTIFACT_MANIFEST,
    "The files an artifact resolved to: its canonical manifest, as the resolver listed it, "
    "checked against the manifest digest before it is served. Its own grant (get on "
    "modelartifacts/manifest).",
    {
        "manifestDigest": string("The artifact's manifest digest.",
                                 pattern=grammar.DIGEST_PATTERN),
        "fileCount": integer("Files in the manifest.", minimum=0),
        "sizeBytes": integer("Their bytes, summed.", minimum=0),
        "files": array(
            "Each file, in the manifest's order (by path); its path is under the mount's root.",
            obj("One file.", {
                "path": string("The file's path, relative, '/'-separated."),
                "size": integer("Its size in bytes.", minimum=0),
                "sha256": string("Its SHA-256, 64 lowercase hex (LFS and large files)."),
                "gitBlobId": string("Its git blob id, 40 lowercase hex (small files)."),
            }, ("path", "size")),
            **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["path"]},
        ),
        "reason": string("Why no file is listed: not resolved yet, a claim or image source, "
                         "or the manifest is not recorded."),
    },
)


def _list_kind(info: resources.ResourceInfo, item: str) -> Schema:
    schema = obj(
        f"A list of {info.kind}.",
        {
            "apiVersion": string(f"{info.group_version}."),
            "kind": string(f"{info.list_kind}."),
            "metadata": meta.ref_with(meta.LIST_META, "Standard list metadata.", default={}),
            "items": array(f"The {info.plural}.", meta.ref(item)),
        },
        ("items",),
    )
    schema["x-kubernetes-group-version-kind"] = [
        {"group": info.group, "kind": info.list_kind, "version": info.version}]
    return schema


def definition_name(kind: str) -> str:
    """The component/definition name of a kind: ``io.gpustack.worker.v1.<Kind>``."""
    return f"io.gpustack.worker.{resources.VERSION}.{kind}"


KINDS: dict[str, Schema] = {
    "ModelArtifact": MODEL_ARTIFACT,
    "NodeModelStore": NODE_MODEL_STORE,
    "ModelPrefetch": MODEL_PREFETCH,
    "ModelArtifactProgress": MODEL_ARTIFACT_PROGRESS,
    "ModelArtifactCopies": MODEL_ARTIFACT_COPIES,
    "ModelArtifactManifest": MODEL_ARTIFACT_MANIFEST,
    # --- cache governance (issue 39) ---
    "ModelStore": MODEL_STORE,
    "ModelStoreBinding": MODEL_STORE_BINDING,
}

# Every named schema: ours, their lists, and the shared metadata definitions.
DEFINITIONS: dict[str, Schema] = {
    **{definition_name(kind): schema for kind, schema in KINDS.items()},
    **{definition_name(info.list_kind): _list_kind(info, definition_name(info.kind))
       for info in resources.SERVED},
    **meta.DEFINITIONS,
}


def for_kind(kind: str) -> Schema:
    """The schema of ``kind``; raises KeyError for a kind this group does not serve."""
    return KINDS[kind]


def resolve(schema: Schema) -> Schema:
    """Follow a ``$ref`` or a single-element ``allOf`` wrapper to the schema it names.

    The wrapper's own keys (``description``, ``nullable``, ``default``) stay visible to callers
    that read ``schema`` itself; this returns the referenced body.
    """
    seen = 0
    while True:
        if "$ref" in schema:
            schema = DEFINITIONS[str(schema["$ref"]).removeprefix(meta.REF_PREFIX)]
        elif "allOf" in schema and len(schema["allOf"]) == 1 and "type" not in schema:
            schema = schema["allOf"][0]
        else:
            return schema
        seen += 1
        if seen > 16:
            raise ValueError("reference cycle in schema")
