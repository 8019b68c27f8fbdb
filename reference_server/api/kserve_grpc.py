"""KServe V2 (Open Inference Protocol) over gRPC for the classifier: the `inference.GRPCInferenceService`
that `tritonclient.grpc` and KServe's clients call, beside the REST routes (`kserve_routes`).

It runs on the serving process's event loop (grpc.aio), so both protocols share one batcher and one
queue. Every method takes its request as bytes and parses it itself, so a body that is no protobuf
of the method's type gets INVALID_ARGUMENT naming the message, never grpc's INTERNAL. Statuses:
INVALID_ARGUMENT for a malformed request or tensor, NOT_FOUND for an unknown model, UNAVAILABLE
when the queue is full or the server drains (as Triton answers), with the same messages as REST.
Outputs go back as `raw_output_contents`, as Triton sends them.
"""

from __future__ import annotations

import logging
import time
import uuid

import grpc
import numpy as np
from google.protobuf.message import DecodeError

from contract.open_inference import open_inference_pb2 as pb
from reference_server.api.v2_inference import classifier_service, infer_batched
from reference_server.api.v2_tensors import (
    MODEL_VERSION,
    V2Error,
    check_output_names,
    classifier_outputs,
    elements_from_raw,
    elements_from_values,
    input_rows,
    model_metadata,
)

log = logging.getLogger(__name__)
SERVICE = "inference.GRPCInferenceService"
STATUS = {"invalid": grpc.StatusCode.INVALID_ARGUMENT, "not_found": grpc.StatusCode.NOT_FOUND,
          "unavailable": grpc.StatusCode.UNAVAILABLE}
# the typed contents field that carries each datatype (FP16 and BF16 travel only as raw contents)
CONTENTS_FIELD = {"FP32": "fp32_contents", "FP64": "fp64_contents", "INT8": "int_contents",
                  "INT16": "int_contents", "INT32": "int_contents", "INT64": "int64_contents",
                  "UINT8": "uint_contents", "UINT16": "uint_contents", "UINT32": "uint_contents",
                  "UINT64": "uint64_contents"}


class InferenceService:
    """The service's methods over one serving runtime (`api.runtime.ServingRuntime`)."""

    def __init__(self, runtime) -> None:
        self.runtime = runtime

    def handler(self) -> grpc.GenericRpcHandler:
        methods = {
            "ServerLive": (pb.ServerLiveRequest, self.server_live),
            "ServerReady": (pb.ServerReadyRequest, self.server_ready),
            "ModelReady": (pb.ModelReadyRequest, self.model_ready),
            "ServerMetadata": (pb.ServerMetadataRequest, self.server_metadata),
            "ModelMetadata": (pb.ModelMetadataRequest, self.model_metadata),
            "ModelInfer": (pb.ModelInferRequest, self.model_infer),
        }
        return grpc.method_handlers_generic_handler(SERVICE, {
            name: grpc.unary_unary_rpc_method_handler(_parsed(message, method),
                                                      response_serializer=lambda reply: reply.SerializeToString())
            for name, (message, method) in methods.items()})

    async def server_live(self, request) -> pb.ServerLiveResponse:
        return pb.ServerLiveResponse(live=True)

    async def server_ready(self, request) -> pb.ServerReadyResponse:
        return pb.ServerReadyResponse(ready=self.runtime.ready)

    async def model_ready(self, request) -> pb.ModelReadyResponse:
        classifier_service(self.runtime, request.name)
        return pb.ModelReadyResponse(ready=True)

    async def server_metadata(self, request) -> pb.ServerMetadataResponse:
        return pb.ServerMetadataResponse(name="servecap", version="0.1.0")

    async def model_metadata(self, request) -> pb.ModelMetadataResponse:
        meta = model_metadata(classifier_service(self.runtime, request.name).config)
        tensor = pb.ModelMetadataResponse.TensorMetadata
        return pb.ModelMetadataResponse(
            name=meta["name"], versions=meta["versions"], platform=meta["platform"],
            inputs=[tensor(name=t["name"], datatype=t["datatype"], shape=t["shape"]) for t in meta["inputs"]],
            outputs=[tensor(name=t["name"], datatype=t["datatype"], shape=t["shape"]) for t in meta["outputs"]])

    async def model_infer(self, request: pb.ModelInferRequest) -> pb.ModelInferResponse:
        received_s = time.monotonic()
        service = classifier_service(self.runtime, request.model_name)
        rows = _rows(request, service.config)
        wanted = check_output_names([o.name for o in request.outputs])
        probs = await infer_batched(self.runtime, service, rows, received_s)
        reply = pb.ModelInferResponse(model_name=service.config.name, model_version=MODEL_VERSION,
                                      id=request.id or uuid.uuid4().hex)
        for output in classifier_outputs(probs, wanted):
            reply.outputs.add(name=output.name, datatype=output.datatype, shape=output.shape)
            reply.raw_output_contents.append(output.array.tobytes())
        return reply


def _parsed(message_type, method):
    """A grpc.aio behaviour that parses the request bytes, runs `method` and maps V2Error to a status."""
    async def behaviour(request_bytes: bytes, context: grpc.aio.ServicerContext):
        try:
            request = message_type.FromString(request_bytes)
        except DecodeError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                f"the request is not a valid inference.{message_type.__name__} protobuf: {exc}")
        try:
            return await method(request)
        except V2Error as exc:
            await context.abort(STATUS[exc.kind], str(exc))
    return behaviour


def _rows(request: pb.ModelInferRequest, config) -> np.ndarray:
    if len(request.inputs) != 1:
        raise V2Error(f"expected exactly one input 'features', got {len(request.inputs)}")
    tensor = request.inputs[0]
    shape = list(tensor.shape)
    if request.raw_input_contents:
        if len(request.raw_input_contents) != len(request.inputs):
            raise V2Error(f"raw_input_contents has {len(request.raw_input_contents)} entries for "
                          f"{len(request.inputs)} inputs")
        if tensor.HasField("contents"):
            raise V2Error(f"input {tensor.name!r} gives both contents and raw_input_contents")
        elements = elements_from_raw(tensor.datatype, shape, request.raw_input_contents[0], f"input {tensor.name!r}")
    else:
        field = CONTENTS_FIELD.get(tensor.datatype)
        if field is None:
            raise V2Error(f"input datatype {tensor.datatype!r} travels only as raw_input_contents (or is "
                          f"not supported); typed contents take {sorted(CONTENTS_FIELD)}")
        elements = elements_from_values(tensor.datatype, list(getattr(tensor.contents, field)))
    return input_rows(tensor.name, tensor.datatype, shape, elements,
                      num_features=config.num_features, max_batch_size=config.max_batch_size)


async def start_grpc_server(runtime, host: str, port: int) -> tuple[grpc.aio.Server, int]:
    """The service listening on host:port (0: any free port); returns (server, the bound port)."""
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((InferenceService(runtime).handler(),))
    bound = server.add_insecure_port(f"{host}:{port}")
    if bound == 0:
        raise OSError(f"KServe V2 gRPC: could not listen on {host}:{port}")
    await server.start()
    log.info("KServe V2 gRPC on %s:%d", host, bound)
    return server, bound
