"""The generic resource store: Kubernetes write/read semantics over a revisioned key-value store.

One ``ResourceStore`` per resource, parametrized by its ``strategy.Strategy``. Objects in and out
are plain dicts (``*_record`` variants hand out storage records so the HTTP layer can copy stored
bytes). Storage exceptions become ``apiserver.errors`` statuses here, through the one mapping
(``statuses.from_storage``).
"""

from __future__ import annotations

import asyncio
import builtins
import copy
import dataclasses
import functools
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from apiserver import errors
from apiserver.registry import (
    codec,
    continuation,
    events,
    meta,
    options,
    selectors,
    statuses,
    strategy,
)
from apiserver.storage import interface
from openapi import fields, names, objectmeta, wire

T = TypeVar("T")

INLINE_ENTRIES = 512
"""Metadata with more labels, annotations, finalizers, owners and managed fields than this is
checked in a worker thread."""
FRESH_WAIT = 3.0
"""How long a read from a resourceVersion the store has not reached waits for it before the 504
"Too large resource version" (kube-apiserver's watch cache waits 3 s)."""
_GENERATE_ATTEMPTS = 8
_UPDATE_ATTEMPTS = 8
GC_FINALIZERS = {"Foreground": "foregroundDeletion", "Orphan": "orphan"}


@dataclasses.dataclass(frozen=True, slots=True)
class ListResult:
    records: list[interface.Record]
    revision: int
    continue_token: str = ""
    remaining: int | None = None

    def items(self) -> list[wire.Obj]:
        return [codec.decode(record) for record in self.records]


@dataclasses.dataclass(frozen=True, slots=True)
class DeleteResult:
    object: wire.Obj
    removed: bool
    """False when finalizers keep the object (it is now marked for deletion)."""


def _unversioned(obj: wire.Obj) -> wire.Obj:
    return {**obj, "metadata": {k: v for k, v in obj["metadata"].items()
                                if k != "resourceVersion"}}


def _entries(metadata: Any) -> int:
    """How many map and list entries ``metadata`` holds (cheap: no walk)."""
    if not isinstance(metadata, dict):
        return 0
    return sum(len(value) for value in metadata.values() if isinstance(value, dict | list))


async def _in_thread(work: Callable[[], T]) -> T:
    return await asyncio.to_thread(work)


Present = events.Present
as_stored = events.as_stored


class ResourceStore:
    def __init__(self, storage: interface.Store, rules: strategy.Strategy,
                 offload: Callable[[Callable[[], list[fields.FieldError]]],
                                   Awaitable[list[fields.FieldError]]] = _in_thread,
                 generate_name: Callable[[str], str] = meta.generate_name, *,
                 admission: strategy.Admission, fresh_wait: float = FRESH_WAIT,
                 present: Present = as_stored) -> None:
        """``offload`` runs the checks of large metadata away from the event loop;
        ``generate_name`` makes a name from a ``generateName`` prefix; ``admission`` judges
        every object the strategy prepared (required: a store without it would admit anything
        its schema allows); ``fresh_wait``: see ``FRESH_WAIT``; ``present`` turns a stored
        record into what reads hand out (GET, LIST, watch: the fields computed when read,
        ``nodecounts``; writes answer the stored object)."""
        self.storage = storage
        self.strategy = rules
        self.admission = admission
        self.info = rules.info
        self._offload = offload
        self._generate_name = generate_name
        self.fresh_wait = fresh_wait
        self.present = present

    # keys and errors ------------------------------------------------------------------------

    def key(self, namespace: str, name: str) -> str:
        if self.info.namespaced:
            return f"/{self.info.plural}/{namespace}/{name}"
        return f"/{self.info.plural}/{name}"

    def prefix(self, namespace: str = "") -> str:
        if self.info.namespaced and namespace:
            return f"/{self.info.plural}/{namespace}/"
        return f"/{self.info.plural}/"

    def split_key(self, key: str) -> tuple[str, str]:
        """``(namespace, name)`` of a key, without decoding the value."""
        parts = key.split("/")
        return (parts[2], parts[3]) if self.info.namespaced else ("", parts[2])

    async def _current(self) -> int:
        return await self.storage.current_revision()

    # reads ----------------------------------------------------------------------------------

    async def get_record(self, namespace: str, name: str, *,
                         resource_version: str = "") -> interface.Record:
        if resource_version not in ("", "0"):
            wanted = options.parse_revision(resource_version)
            if wanted > await self._current():
                current = await self.storage.reached(wanted, self.fresh_wait)
                if wanted > current:
                    raise statuses.too_large(current, wanted, retry_after=1)
        record = await self.storage.get(self.key(namespace, name))
        if record is None:
            raise statuses.not_found(self.info, name)
        return self.present(record)

    async def get(self, namespace: str, name: str, *, resource_version: str = "") -> wire.Obj:
        return codec.decode(await self.get_record(namespace, name,
                                                  resource_version=resource_version))

    def matches(self, record: interface.Record, label_selector: selectors.LabelSelector,
                field_selector: selectors.FieldSelector) -> bool:
        return events.matches(record, label_selector, field_selector, self.split_key)

    async def list(self, namespace: str = "",
                   opts: options.ListOptions | None = None) -> ListResult:
        opts = opts or options.ListOptions()
        options.check_list(opts)
        prefix = self.prefix(namespace)
        revision, start_after = 0, ""
        # resourceVersion "0" or NotOlderThan: any state that new will do (the watch cache)
        recent = not opts.continue_token and opts.resource_version != "" and (
            opts.resource_version_match != options.EXACT)
        not_older_than = 0
        if opts.continue_token:
            if opts.resource_version not in ("", "0"):
                raise errors.BadRequest(
                    "specifying resource version is not allowed when using continue")
            revision, start_after = continuation.decode(opts.continue_token, prefix=prefix)
        elif opts.resource_version not in ("", "0"):
            wanted = options.parse_revision(opts.resource_version)
            if opts.resource_version_match == options.EXACT:
                revision = wanted
            else:
                if opts.limit and wanted > (current := await self._current()):
                    # a paged list is read at one revision, at once (kube's etcd answer)
                    raise statuses.too_large(current, wanted)
                not_older_than = wanted  # list_recent waits for it, then 504
        filtered = not (opts.label_selector.empty and opts.field_selector.empty)
        found: list[interface.Record] = []
        while True:
            want = opts.limit - len(found) if opts.limit else 0
            try:
                if recent:  # the first page; later ones read at its revision
                    page = await self.storage.list_recent(prefix, not_older_than=not_older_than,
                                                          limit=want, wait=self.fresh_wait)
                    recent = False
                else:
                    page = await self.storage.list(prefix, revision=revision,
                                                   start_after=start_after, limit=want)
            except (interface.Compacted, interface.FutureRevision) as exc:
                raise statuses.from_storage(exc, continuing=bool(opts.continue_token),
                                            current=await self._current()) from exc
            revision = page.revision
            for index, record in enumerate(page.records):
                if filtered and not self.matches(record, opts.label_selector,
                                                 opts.field_selector):
                    continue
                found.append(self.present(record))
                if opts.limit and len(found) >= opts.limit:
                    more = page.more or index < len(page.records) - 1
                    token = continuation.encode(revision, record.key) if more else ""
                    remaining = None if filtered else page.remaining
                    return ListResult(found, revision, token, remaining if more else None)
            if not page.more or not page.records:
                return ListResult(found, revision)
            start_after = page.records[-1].key

    # create ---------------------------------------------------------------------------------

    async def create(self, obj: wire.Obj, *, namespace: str = "", dry_run: bool = False,
                     from_body: bool = False) -> wire.Obj:
        """Create ``obj`` (a fresh copy is stored; the caller's dict is left alone).

        ``from_body``: ``obj`` was just decoded from a request and pruned by the endpoint; it is
        the caller's to give away, so it is used as is (no copy, no second pruning walk).
        """
        if not from_body:
            obj = copy.deepcopy(obj)
        await self._check_metadata(obj)
        self._check_type(obj)
        metadata = obj.get("metadata")
        if not isinstance(metadata, dict):
            metadata = obj["metadata"] = {}
        if metadata.get("resourceVersion"):
            raise errors.BadRequest("resourceVersion should not be set on objects to be created")
        self._set_create_namespace(metadata, namespace)
        name, generate = metadata.get("name") or "", metadata.get("generateName") or ""
        if not name and not generate:
            raise statuses.invalid(self.info, "", [fields.required("metadata.name",
                                                    "name or generateName is required")])
        metadata["uid"] = str(uuid.uuid4())
        metadata["creationTimestamp"] = meta.now()
        self.strategy.prepare_for_create(obj, pruned=from_body)
        for attempt in range(_GENERATE_ATTEMPTS):
            if not name:
                metadata["name"] = self._generate_name(generate)
                problems = objectmeta.name_problems("metadata.name", metadata["name"])
            else:
                problems = []
            write = strategy.Write("CREATE", self.info, obj)
            problems.extend(self.admission.admit(write))
            if problems:
                raise statuses.invalid(self.info, metadata["name"], problems)
            await self.admission.authorize(write)
            key = self.key(metadata.get("namespace", ""), metadata["name"])
            if dry_run:
                if await self.storage.get(key) is not None:
                    raise statuses.exists(self.info, metadata["name"])
                return obj
            try:
                record = await self.storage.create(key, codec.encode(obj))
            except interface.KeyExists as exc:
                if name or attempt == _GENERATE_ATTEMPTS - 1:
                    raise statuses.from_storage(exc, self.info, metadata["name"]) from exc
                continue
            return codec.decode(record)
        raise errors.InternalError("could not generate a unique name")  # pragma: no cover

    def _set_create_namespace(self, metadata: wire.Obj, namespace: str) -> None:
        if not self.info.namespaced:
            metadata.pop("namespace", None)
            return
        given = metadata.get("namespace") or ""
        if given and namespace and given != namespace:
            raise errors.BadRequest("the namespace of the provided object does not match the"
                                    " namespace sent on the request")
        metadata["namespace"] = given or namespace
        if not metadata["namespace"]:
            raise errors.BadRequest("a namespace is required to create a namespaced object")
        problems = names.dns_label_problems(metadata["namespace"])
        if problems:
            raise statuses.invalid(self.info, metadata.get("name") or "", [
                fields.invalid("metadata.namespace", metadata["namespace"], problem)
                for problem in problems])

    # updates --------------------------------------------------------------------------------

    async def _check_metadata(self, obj: wire.Obj) -> None:
        """ObjectMeta as sent, before anything reads it (422 naming each field); metadata with
        many entries (up to 3 MiB of labels, say) is checked off the event loop."""
        metadata = obj.get("metadata")
        if _entries(metadata) > INLINE_ENTRIES:
            problems = await self._offload(functools.partial(self.strategy.check_metadata,
                                                             metadata))
        else:
            problems = self.strategy.check_metadata(metadata)
        if problems:
            given = metadata.get("name") if isinstance(metadata, dict) else None
            raise statuses.invalid(self.info, given if isinstance(given, str) else "", problems)

    def _check_type(self, obj: wire.Obj) -> None:
        """``apiVersion`` and ``kind``, when given, must be this resource's (400 otherwise)."""
        api_version = obj.get("apiVersion")
        if api_version not in (None, "", self.info.group_version):
            raise errors.BadRequest(
                f"the API version in the data ({fields.shown(api_version)}) does not match the"
                f" expected API version ({self.info.group_version})")
        kind = obj.get("kind")
        if kind not in (None, "", self.info.kind):
            raise errors.BadRequest(
                f"the kind in the data ({fields.shown(kind)}) does not match the expected kind"
                f" ({self.info.kind})")
        obj["apiVersion"] = self.info.group_version
        obj["kind"] = self.info.kind

    def _check_identity(self, obj: wire.Obj, namespace: str, name: str) -> None:
        """The body/URL mismatch rules for update and patch (400s with the upstream messages);
        the metadata's types were checked already."""
        self._check_type(obj)
        metadata = obj.get("metadata")
        if not isinstance(metadata, dict):
            metadata = obj["metadata"] = {}
        if self.info.namespaced:
            given = metadata.get("namespace") or ""
            if given and given != namespace:
                raise errors.BadRequest("the namespace of the provided object does not match"
                                        " the namespace sent on the request")
            metadata["namespace"] = namespace
        else:
            metadata.pop("namespace", None)
        given_name = metadata.get("name") or ""
        if given_name and given_name != name:
            raise errors.BadRequest(
                f"the name of the object ({fields.shown(given_name)}) does not match the name"
                f" on the URL ({fields.shown(name)})")
        metadata["name"] = name

    async def update(self, obj: wire.Obj, *, namespace: str = "", name: str = "",
                     dry_run: bool = False, from_body: bool = False) -> wire.Obj:
        """PUT on the main resource: resourceVersion required, status kept (``from_body`` as
        for ``create``)."""
        return await self._put(obj, namespace, name, dry_run=dry_run, status=False,
                               from_body=from_body)

    async def update_status(self, obj: wire.Obj, *, namespace: str = "", name: str = "",
                            dry_run: bool = False, from_body: bool = False) -> wire.Obj:
        """PUT on ``/status``: only ``status`` changes; spec and metadata are kept."""
        return await self._put(obj, namespace, name, dry_run=dry_run, status=True,
                               from_body=from_body)

    async def _put(self, obj: wire.Obj, namespace: str, name: str, *, dry_run: bool,
                   status: bool, from_body: bool) -> wire.Obj:
        if not from_body:
            obj = copy.deepcopy(obj)
        await self._check_metadata(obj)
        given_meta = obj.get("metadata")
        metadata: wire.Obj = given_meta if isinstance(given_meta, dict) else {}
        name = name or metadata.get("name") or ""
        namespace = namespace or metadata.get("namespace") or ""
        self._check_identity(obj, namespace, name)
        given = obj["metadata"].get("resourceVersion") or ""
        if not given:
            raise statuses.invalid(self.info, name, [fields.FieldError(
                "metadata.resourceVersion", "FieldValueInvalid",
                "Invalid value: 0x0: must be specified for an update")])
        expected = options.parse_revision(given)
        record = await self.storage.get(self.key(namespace, name))
        if record is None:
            raise statuses.not_found(self.info, name)
        if record.revision != expected:
            raise statuses.stale(self.info, name)
        return await self._commit(record, obj, dry_run=dry_run, status=status, pruned=from_body)

    async def modify(self, namespace: str, name: str, change: Callable[[wire.Obj], wire.Obj], *,
                     status: bool = False, dry_run: bool = False, pruned: bool = False) -> wire.Obj:
        """Read, ``change`` (a patch), write; retried on a race unless the change pinned a
        resourceVersion, which must then equal the stored one (409 otherwise).

        ``pruned``: ``change`` returns objects without unknown fields (it pruned them)."""
        for attempt in range(_UPDATE_ATTEMPTS):
            record = await self.storage.get(self.key(namespace, name))
            if record is None:
                raise statuses.not_found(self.info, name)
            new = change(codec.decode(record))
            if not isinstance(new, dict):
                raise errors.BadRequest("the patched document is not a JSON object")
            await self._check_metadata(new)
            self._check_identity(new, namespace, name)
            given = new["metadata"].get("resourceVersion") or ""
            if given and given != str(record.revision):
                raise statuses.stale(self.info, name)
            try:
                return await self._commit(record, new, dry_run=dry_run, status=status,
                                          pruned=pruned)
            except errors.Conflict:
                if attempt == _UPDATE_ATTEMPTS - 1:
                    raise
        raise statuses.stale(self.info, name)  # pragma: no cover

    async def _commit(self, record: interface.Record, new: wire.Obj, *, dry_run: bool,
                      status: bool, pruned: bool = False) -> wire.Obj:
        old = codec.decode(record)
        name = old["metadata"]["name"]
        if status:
            new = self.strategy.prepare_for_status_update(new, old, pruned=pruned)
            write = strategy.Write("UPDATE", self.info, new, old, subresource="status")
            problems = self.admission.admit(write)
        else:
            self.strategy.prepare_for_update(new, old, pruned=pruned)
            problems = self.strategy.check_update(new, old)
            write = strategy.Write("UPDATE", self.info, new, old)
            problems.extend(self.admission.admit(write))
        if problems:
            raise statuses.invalid(self.info, name, problems)
        await self.admission.authorize(write)
        if _unversioned(new) == _unversioned(old):
            return old  # nothing changed: no write, no event, same resourceVersion
        value = codec.encode(new)
        if dry_run:
            new["metadata"]["resourceVersion"] = str(record.revision)
            return new
        written = await self._swap(record, value, name)
        metadata = new["metadata"]
        if metadata.get("deletionTimestamp") and not metadata.get("finalizers"):
            await self._remove(written, name)
        return codec.decode(written)

    async def _swap(self, record: interface.Record, value: bytes,
                    name: str) -> interface.Record:
        try:
            return await self.storage.update(record.key, value, expected_revision=record.revision)
        except (interface.RevisionConflict, interface.KeyNotFound) as exc:
            raise statuses.from_storage(exc, self.info, name) from exc

    async def _remove(self, record: interface.Record, name: str) -> interface.Record:
        try:
            return await self.storage.delete(record.key, expected_revision=record.revision)
        except (interface.RevisionConflict, interface.KeyNotFound) as exc:
            raise statuses.from_storage(exc, self.info, name) from exc

    # delete ---------------------------------------------------------------------------------

    async def delete(self, namespace: str, name: str,
                     opts: options.DeleteOptions | None = None) -> DeleteResult:
        opts = opts or options.DeleteOptions()
        options.check_delete(opts)
        policy = opts.propagation_policy
        if opts.orphan_dependents is not None:
            policy = "Orphan" if opts.orphan_dependents else "Background"
        for attempt in range(_UPDATE_ATTEMPTS):
            record = await self.storage.get(self.key(namespace, name))
            if record is None:
                raise statuses.not_found(self.info, name)
            obj = codec.decode(record)
            self._check_preconditions(obj, opts)
            metadata = obj["metadata"]
            finalizers = list(metadata.get("finalizers") or [])
            if policy:
                finalizers = [f for f in finalizers if f not in GC_FINALIZERS.values()]
                if policy in GC_FINALIZERS:
                    finalizers.append(GC_FINALIZERS[policy])
            try:
                if finalizers:
                    return await self._mark_deleting(record, obj, finalizers, opts.dry_run)
                if opts.dry_run:
                    return DeleteResult(obj, True)
                await self._remove(record, name)
                return DeleteResult(obj, True)
            except errors.Conflict:
                if attempt == _UPDATE_ATTEMPTS - 1:
                    raise
        raise statuses.stale(self.info, name)  # pragma: no cover

    def _check_preconditions(self, obj: wire.Obj, opts: options.DeleteOptions) -> None:
        metadata = obj["metadata"]
        name = metadata["name"]
        if opts.uid and opts.uid != metadata.get("uid"):
            raise statuses.conflict(
                self.info, name, f"Precondition failed: UID in precondition: {opts.uid},"
                                 f" UID in object meta: {metadata.get('uid')}")
        if opts.resource_version and opts.resource_version != metadata["resourceVersion"]:
            raise statuses.conflict(
                self.info, name, f"Precondition failed: ResourceVersion in precondition:"
                                 f" {opts.resource_version}, ResourceVersion in object meta:"
                                 f" {metadata['resourceVersion']}")

    async def _mark_deleting(self, record: interface.Record, obj: wire.Obj,
                             finalizers: builtins.list[str], dry_run: bool) -> DeleteResult:
        metadata = obj["metadata"]
        if metadata.get("deletionTimestamp") and finalizers == metadata.get("finalizers"):
            return DeleteResult(obj, False)
        if not metadata.get("deletionTimestamp"):
            metadata["deletionTimestamp"] = meta.now()
            metadata["generation"] = int(metadata.get("generation") or 0) + 1
        metadata["deletionGracePeriodSeconds"] = 0
        metadata["finalizers"] = finalizers
        if dry_run:
            return DeleteResult(obj, False)
        written = await self._swap(record, codec.encode(obj), metadata["name"])
        return DeleteResult(codec.decode(written), False)

    # watch ----------------------------------------------------------------------------------

    def watch(self, namespace: str = "",
              opts: options.WatchOptions | None = None) -> AsyncIterator[events.WatchEvent]:
        """Kubernetes watch events for ``namespace`` (all when empty); see ``events.stream``.
        The options are checked now, so a refusal comes before any event."""
        opts = opts or options.WatchOptions()
        options.check_watch(opts)
        return events.stream(self.storage, self._watched(namespace, opts), opts,
                             self.split_key, self.present)

    def _watched(self, namespace: str, opts: options.WatchOptions) -> str:
        """The storage prefix a watch reads: the object's own key when the field selector names
        one object (a node plugin's watch of its NodeModelStore), so the storage wakes it only
        for keys starting with that one (the selector still filters: ``node-1`` is a prefix of
        ``node-10``); else the resource's, or the namespace's."""
        named = opts.field_selector.named()
        if named and (namespace or not self.info.namespaced):
            return self.key(namespace, named)
        return self.prefix(namespace)
