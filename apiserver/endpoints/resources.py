"""The REST routes of the served resources under ``/apis/worker.gpustack.ai/v1/``.

Generic over the registry, which is built from ``openapi.resources.SERVED``: each resource gets
its collection (list, watch, create), its items (get, update, patch, delete) and its
subresources, each method allowed exactly when the resource's verbs name it; every other method
answers 405. Subresources are served by the handler ``SUBRESOURCES`` names for them: ``status``
(reads; writes pass the status writers' rules of ``apiserver.admission``: the worker for a
ModelArtifact, the node plugin of that node for a NodeModelStore), ``progress``, ``copies``
and ``manifest`` (computed).
RBAC already allowed each request (``apiserver.auth.middleware``), judging the request's one
parse (``apiserver.request.info``): every handler takes its verb, namespace, name and options from
that same object, never from the query string or the router's own split of the path. The
discovery document itself (the exact group-version path) is served elsewhere.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable

from starlette import requests, routing
from starlette import responses as starlette_responses

from apiserver import errors
from apiserver.admission import attributes as admission_attributes
from apiserver.admission import chain
from apiserver.auth import middleware
from apiserver.auth import user as users
from apiserver.endpoints import apply as applying
from apiserver.endpoints import body as bodies
from apiserver.endpoints import negotiation, patch, request, responses, table, watch
from apiserver.registry import build, codec, options, store
from apiserver.registry.fieldmanager import tracking
from apiserver.request import info as infos
from openapi import resources, wire

PREFIX = f"/apis/{resources.GROUP_VERSION}"
ALL_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"]

Response = starlette_responses.Response


def _not_allowed() -> errors.MethodNotAllowed:
    return errors.MethodNotAllowed(
        "the server does not allow this method on the requested resource")


def _user(req: requests.Request) -> users.UserInfo:
    return middleware.user_of(req.scope)


def _request(req: requests.Request) -> infos.RequestInfo:
    """The request's one parse, checked against the route that matched: the router and the
    parse split the same decoded path, so they agree; a disagreement is refused, never served."""
    found = infos.served(req.scope)
    params = req.path_params
    same_namespace = params.get("namespace", "") == found.namespace
    same_name = "name" not in params or params["name"] == found.name
    if not (found.resource_request and same_namespace and same_name):
        raise errors.NotFound("the server could not find the requested resource")
    return found


Endpoint = Callable[[requests.Request], Awaitable[Response]]


class Handlers:
    """The handlers of one stored resource; its verbs decide which methods it answers."""

    def __init__(self, resource: store.ResourceStore, status_guards: chain.Chain,
                 limits: bodies.Limits = bodies.DEFAULT,
                 tuning: watch.Tuning = watch.DEFAULT) -> None:
        self.store = resource
        self.guards = status_guards
        self.info = resource.info
        self.verbs = frozenset(resource.info.verbs)
        self.limits = limits
        self.tuning = tuning

    # rendering ------------------------------------------------------------------------------

    def _one(self, req: requests.Request, obj: wire.Obj, status: int = 200,
             warnings: list[str] | None = None) -> Response:
        target = negotiation.negotiate(req.headers.get("accept"))
        if target.view is negotiation.View.TABLE:
            body = table.render(self.info, [obj], api_version=target.api_version,
                                include=infos.served(req.scope).include_object,
                                list_meta={"resourceVersion":
                                           obj["metadata"].get("resourceVersion", "")})
        elif target.view is negotiation.View.METADATA:
            body = table.partial(obj, target.api_version)
        else:
            body = obj
        response = responses.json_response(body, status)
        responses.warn(response, request.bounded_warnings(warnings or []))
        return response

    async def _body_object(self, req: requests.Request, mode: str) -> tuple[wire.Obj, list[str]]:
        body = await request.read_body(req, self.limits.max_bytes)
        content_type = req.headers.get("content-type", "")
        decoded = await bodies.decode(body, content_type, self.limits,
                                      duplicates=mode != "Ignore")
        obj = decoded.document
        prune = functools.partial(request.unknown_fields, self.info.kind, obj, mode,
                                  decoded.duplicates)
        # pruning is linear in the body: a large one is pruned off the event loop
        warnings = prune() if len(body) <= self.limits.inline_bytes else await bodies.offload(prune)
        return obj, warnings

    # collection -----------------------------------------------------------------------------

    async def collection(self, req: requests.Request) -> Response:
        with admission_attributes.requested_by(_user(req)):
            return await self._collection(req)

    async def _collection(self, req: requests.Request) -> Response:
        found = _request(req)
        namespace = found.namespace
        verb = _served_verb(req, found)
        if verb == "watch" and found.watch_options is not None:
            self._allow("watch")
            return self._watch(req, namespace, found.watch_options, found.include_object)
        if verb == "list" and found.list_options is not None:
            self._allow("list")
            return await self._list(req, namespace, found.list_options, found.include_object)
        if (verb == "create" and found.write_options is not None and "create" in self.verbs
                and (namespace or not self.info.namespaced)):
            wo = found.write_options
            obj, warnings = await self._body_object(req, wo.field_validation)
            with tracking.writing(applying.writer(req, wo, status=False)) as writer:
                tracking.take_reset(obj, writer)
                created = await self.store.create(obj, namespace=namespace, dry_run=wo.dry_run,
                                                  from_body=True)
            return self._one(req, created, 201, warnings)
        raise _not_allowed()

    async def _list(self, req: requests.Request, namespace: str, opts: options.ListOptions,
                    include: str) -> Response:
        target = negotiation.negotiate(req.headers.get("accept"), collection=True)
        result = await self.store.list(namespace, opts)
        list_meta: wire.Obj = {"resourceVersion": str(result.revision)}
        if result.continue_token:
            list_meta["continue"] = result.continue_token
        if result.remaining is not None:
            list_meta["remainingItemCount"] = result.remaining
        if target.view is negotiation.View.OBJECT:
            return responses.raw_response(self._list_bytes(result, list_meta))
        if target.view is negotiation.View.TABLE:
            body = table.render(self.info, result.items(), api_version=target.api_version,
                                include=include, list_meta=list_meta)
        else:
            body = table.metadata_list(result.items(), target.api_version, list_meta)
        return responses.json_response(body)

    def _list_bytes(self, result: store.ListResult, list_meta: wire.Obj) -> bytes:
        # Items are spliced from the stored bytes: no decode/encode per object, and the body
        # is built in one join (each further copy of a LIST's megabytes is a fresh allocation
        # the kernel has to fault in: 5-15 ms for 10,000 objects on this machine).
        head = responses.json_bytes({"kind": self.info.list_kind,
                                     "apiVersion": self.info.group_version,
                                     "metadata": list_meta})
        parts = [codec.raw(record) for record in result.records]
        if not parts:
            return head[:-1] + b',"items":[]}'
        parts[0] = head[:-1] + b',"items":[' + parts[0]
        parts[-1] += b"]}"
        return b",".join(parts)

    def _watch(self, req: requests.Request, namespace: str, opts: options.WatchOptions,
               include: str) -> Response:
        target = negotiation.negotiate(req.headers.get("accept"))
        options.check_watch(opts)  # refuse bad combinations before the 200 goes out
        events = self.store.watch(namespace, opts)
        return watch.response(events, watch.Encoder(self.info, target, include), opts,
                              self.tuning)

    # one object -----------------------------------------------------------------------------

    async def item(self, req: requests.Request) -> Response:
        with admission_attributes.requested_by(_user(req)):
            return await self._item(req)

    async def _item(self, req: requests.Request) -> Response:
        found = _request(req)
        verb = _served_verb(req, found)
        if verb not in _ITEM_VERBS:
            raise _not_allowed()
        self._allow(verb)
        if verb == "get":
            return await self._get(req, found)
        if verb == "delete":
            return await self._delete(req, found)
        if verb == "update":
            return await self._put(req, found, status=False)
        return await self._patch(req, found, status=False)

    def _allow(self, verb: str, verbs: frozenset[str] | None = None) -> None:
        if verb not in (self.verbs if verbs is None else verbs):
            raise _not_allowed()

    async def status(self, req: requests.Request) -> Response:
        """``<plural>/{name}/status``: reads for anyone allowed, writes past the status guard."""
        sub = self.info.subresource("status")
        verbs = frozenset(sub.verbs if sub is not None else ())
        found = _request(req)
        verb = _served_verb(req, found)
        self._allow(verb, verbs)
        if verb == "get":
            return await self._get(req, found)
        if verb not in ("update", "patch"):
            raise _not_allowed()
        await self.guards.check(self.info, _user(req), found.name)
        with admission_attributes.requested_by(_user(req)):
            if verb == "update":
                return await self._put(req, found, status=True)
            return await self._patch(req, found, status=True)

    async def _get(self, req: requests.Request, found: infos.RequestInfo) -> Response:
        target = negotiation.negotiate(req.headers.get("accept"))
        record = await self.store.get_record(
            found.namespace, found.name, resource_version=found.resource_version)
        if target.view is negotiation.View.OBJECT:
            return responses.raw_response(codec.raw(record))
        return self._one(req, codec.decode(record))

    async def _put(self, req: requests.Request, found: infos.RequestInfo, *,
                   status: bool) -> Response:
        wo = _write_options(found)
        namespace, name = found.namespace, found.name
        obj, warnings = await self._body_object(req, wo.field_validation)
        with tracking.writing(applying.writer(req, wo, status=status)) as writer:
            tracking.take_reset(obj, writer)
            if status:
                updated = await self.store.update_status(obj, namespace=namespace, name=name,
                                                         dry_run=wo.dry_run, from_body=True)
            else:
                updated = await self.store.update(obj, namespace=namespace, name=name,
                                                  dry_run=wo.dry_run, from_body=True)
        return self._one(req, updated, 200, warnings)

    async def _patch(self, req: requests.Request, found: infos.RequestInfo, *,
                     status: bool) -> Response:
        wo = _write_options(found)
        namespace, name = found.namespace, found.name
        content_type = req.headers.get("content-type", "")
        media = bodies.media_type(content_type)
        if media == applying.APPLY_PATCH:
            body = await request.read_body(req, self.limits.max_bytes)
            result, created, applied_warnings = await applying.apply(
                self.store, req, found, wo, body, self.limits, status=status)
            return self._one(req, result, 201 if created else 200, applied_warnings)
        if media not in patch.ACCEPTED:
            raise patch.unsupported()
        applying.check_patch_options(wo, is_apply=False)
        apply = await patch.patcher(
            content_type, await request.read_body(req, self.limits.max_bytes), self.limits)
        warnings: list[str] = []
        writer = applying.writer(req, wo, status=status)

        def change(current: wire.Obj) -> wire.Obj:
            patched = apply(current)
            writer.reset = False
            tracking.take_reset(patched, writer)
            warnings[:] = request.unknown_fields(self.info.kind, patched, wo.field_validation)
            return patched

        with tracking.writing(writer):
            updated = await self.store.modify(namespace, name, change, status=status,
                                              dry_run=wo.dry_run, pruned=True)
        return self._one(req, updated, 200, warnings)

    async def _delete(self, req: requests.Request, found: infos.RequestInfo) -> Response:
        namespace, name = found.namespace, found.name
        if found.delete_query is None:
            raise _not_allowed()
        opts = await request.delete_options(
            found.delete_query, await request.read_body(req, self.limits.max_bytes), self.limits)
        result = await self.store.delete(namespace, name, opts)
        if result.removed:
            details: errors.StatusDetails = {
                "name": name, "group": self.info.group, "kind": self.info.plural,
                "uid": result.object["metadata"].get("uid", "")}
            return responses.json_response(responses.success(details))
        return self._one(req, result.object, 202 if opts.orphan_dependents is False else 200)


_ITEM_VERBS = ("get", "update", "patch", "delete")


def _served_verb(req: requests.Request, found: infos.RequestInfo) -> str:
    """The verb the request was authorized for; HEAD is judged as a get but not served."""
    return "" if req.method == "HEAD" else found.verb


def _write_options(found: infos.RequestInfo) -> request.WriteOptions:
    if found.write_options is None:
        raise _not_allowed()
    return found.write_options


def _status(registry: build.Registry, handlers: Handlers) -> Endpoint:
    return handlers.status


def _computed(read: Callable[[build.Registry, str, str], Awaitable[object]],
              ) -> Callable[[build.Registry, Handlers], Endpoint]:
    """A computed, get-only subresource: ``read(registry, namespace, name)`` answers it."""
    def handler(registry: build.Registry, handlers: Handlers) -> Endpoint:
        async def computed(req: requests.Request) -> Response:
            found = _request(req)
            if _served_verb(req, found) != "get":
                raise _not_allowed()
            negotiation.negotiate(req.headers.get("accept"))
            return responses.json_response(await read(registry, found.namespace, found.name))

        return computed

    return handler


# The handler of each subresource name a resource may declare in ``openapi.resources``.
SUBRESOURCES: dict[str, Callable[[build.Registry, Handlers], Endpoint]] = {
    "status": _status,
    "progress": _computed(build.Registry.progress),
    "copies": _computed(build.Registry.copies),
    "manifest": _computed(build.Registry.manifest),
}


def routes(registry: build.Registry, status_guards: chain.Chain,
           limits: bodies.Limits = bodies.DEFAULT,
           tuning: watch.Tuning = watch.DEFAULT) -> list[routing.BaseRoute]:
    """Every route of every resource in the registry (built from the one resource table);
    status writes pass ``status_guards``, ``limits`` bound every request body, ``tuning`` paces
    every watch."""
    found: list[routing.BaseRoute] = []
    for resource in registry.stores.values():
        info = resource.info
        handlers = Handlers(resource, status_guards, limits, tuning)
        if info.namespaced:
            collection = f"{PREFIX}/namespaces/{{namespace}}/{info.plural}"
            # the list across namespaces (POST there answers 405)
            found.append(routing.Route(f"{PREFIX}/{info.plural}", handlers.collection,
                                       methods=ALL_METHODS))
        else:
            collection = f"{PREFIX}/{info.plural}"
        found.append(routing.Route(collection, handlers.collection, methods=ALL_METHODS))
        found.append(routing.Route(collection + "/{name}", handlers.item, methods=ALL_METHODS))
        for sub in info.subresources:
            endpoint = SUBRESOURCES[sub.name](registry, handlers)
            found.append(routing.Route(f"{collection}/{{name}}/{sub.name}", endpoint,
                                       methods=ALL_METHODS))
    return found
