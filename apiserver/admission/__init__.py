"""Admission: one ordered chain of small named rules that every write passes.

Like kube-apiserver's admission plugins, in three stages, each rule in one of them
(``chain.build`` lists them in order; ``docs/architecture.md`` shows the table):

1. **writers**, on the request before its body is read: who may write a status at all
   (``writers.ArtifactStatus``: the worker only; ``writers.NodeStoreStatus``: the node plugin of
   that node, by three rules);
2. **mutating**, on the object the strategy prepared (none today: defaults are the schema's and
   applied by the registry's strategy before admission, as kube-apiserver defaults on decoding);
3. **validating**: the schema (``rules.Schema``), then the rules it cannot say
   (``artifacts``: one source and its grammars, the image-volume floor, the immutable spec;
   ``rules.Watermarks``: ``openapi.nodestore``'s low-below-high rule; ``prefetches``: a
   ModelPrefetch's names, targets and retention, its artifact a hub source, its artifact fixed).

What a rule needs of the cluster (the worker identity, the plugin's ServiceAccount, its Pods,
kube-apiserver's version) reaches the chain through one object, ``facts.ClusterFacts``, which
each mode fills (``wiring.access``, ``wiring.delegation``). The registry calls the chain through
its own seam (``registry.strategy.Admission``), so the registry never imports this package.
"""
