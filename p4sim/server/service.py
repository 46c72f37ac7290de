"""The P4Runtime v1 gRPC service of p4sim, on grpcio's threaded server.

RPCs: Capabilities, StreamChannel (arbitration, packet-out/in, digest lists and acks),
Set/GetForwardingPipelineConfig, Write (the three atomicity modes) and Read (wildcards).
Per-update failures of a Write are reported as the spec says: status UNKNOWN whose
`google.rpc.Status.details` hold one `p4.v1.Error` per update, packed as `Any`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import grpc
from finsy import pbutil
from finsy.proto import U128, p4r, p4r_grpc, rpc_code, rpc_status

from p4sim.server.device import Device
from p4sim.server.errors import P4RuntimeError, invalid
from p4sim.server.pipeline import Undo
from p4sim.server.stream import ControllerStream

LOG = logging.getLogger("p4sim.server")

API_VERSION = "1.4.0"
READ_CHUNK = 1000  # entities per ReadResponse
MAX_MESSAGE = 64 * 1024 * 1024


def _abort(context: grpc.ServicerContext, err: P4RuntimeError) -> NoReturn:
    context.abort(err.grpc_code, err.message)
    raise AssertionError("unreachable")


def _write_error(context: grpc.ServicerContext, errors: list[p4r.Error]) -> NoReturn:
    """Abort a Write with UNKNOWN and one p4r.Error per update in the status details."""
    failed = sum(1 for e in errors if e.canonical_code != rpc_code.OK)
    status = rpc_status.Status(
        code=rpc_code.UNKNOWN,
        message=f"Write failure: {failed} of {len(errors)} updates failed",
        details=[pbutil.to_any(e) for e in errors],
    )
    context.abort_with_status(_RichStatus(status))
    raise AssertionError("unreachable")


@dataclass(frozen=True)
class _RichStatus(grpc.Status):  # type: ignore[misc]
    """A grpc.Status carrying a google.rpc.Status in the `grpc-status-details-bin` trailer."""

    status: rpc_status.Status

    @property
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNKNOWN

    @property
    def details(self) -> str:
        return str(self.status.message)

    @property
    def trailing_metadata(self) -> tuple[tuple[str, bytes], ...]:
        return (("grpc-status-details-bin", self.status.SerializeToString()),)


class P4RuntimeService(p4r_grpc.P4RuntimeServicer):
    """The servicer: every handler validates its request before touching the device."""

    def __init__(self, device: Device) -> None:
        self.device = device

    def _check_device(self, device_id: int) -> None:
        if device_id != self.device.device_id:
            raise P4RuntimeError("NOT_FOUND", f"unknown device id {device_id}")

    # ------------------------------------------------------------ Capabilities
    def Capabilities(
        self, request: p4r.CapabilitiesRequest, context: grpc.ServicerContext
    ) -> p4r.CapabilitiesResponse:
        return p4r.CapabilitiesResponse(p4runtime_api_version=API_VERSION)

    # ------------------------------------------------------------------ Write
    def Write(self, request: p4r.WriteRequest, context: grpc.ServicerContext) -> p4r.WriteResponse:
        dev = self.device
        try:
            self._check_device(request.device_id)
            eid = U128.decode(request.election_id) if request.HasField("election_id") else None
            dev.arbiter.check_primary(request.role, eid)
            pipeline = dev.require_pipeline()
        except P4RuntimeError as err:
            _abort(context, err)
        A = p4r.WriteRequest
        atomic = request.atomicity
        if atomic not in (A.CONTINUE_ON_ERROR, A.ROLLBACK_ON_ERROR, A.DATAPLANE_ATOMIC):
            _abort(context, invalid(f"unknown atomicity {atomic}"))
        errors: list[p4r.Error] = []
        failed = False
        with dev.lock:
            if dev.pipeline is not pipeline:
                _abort(context, P4RuntimeError("ABORTED", "the pipeline changed during the write"))
            undos: list[Undo] = []
            for update in request.updates:
                try:
                    undos.append(pipeline.apply(update))
                    errors.append(p4r.Error(canonical_code=rpc_code.OK))
                except P4RuntimeError as err:
                    failed = True
                    errors.append(p4r.Error(canonical_code=err.canonical_code, message=err.message))
                    if atomic != A.CONTINUE_ON_ERROR:
                        break
                except Exception as exc:  # an engine bug must not kill the server
                    LOG.exception("internal error in a write")
                    failed = True
                    errors.append(p4r.Error(canonical_code=rpc_code.INTERNAL, message=repr(exc)))
                    if atomic != A.CONTINUE_ON_ERROR:
                        break
            if failed and atomic != A.CONTINUE_ON_ERROR:
                for undo in reversed(undos):
                    try:
                        undo()
                    except Exception:
                        LOG.exception("rollback step failed")
                # every update is reported: the failed one with its code, the rest ABORTED
                n = len(request.updates)
                bad = len(errors) - 1
                errors = [
                    errors[bad]
                    if i == bad
                    else p4r.Error(canonical_code=rpc_code.ABORTED, message="rolled back")
                    for i in range(n)
                ]
        if failed:
            _write_error(context, errors)
        return p4r.WriteResponse()

    # ------------------------------------------------------------------- Read
    def Read(
        self, request: p4r.ReadRequest, context: grpc.ServicerContext
    ) -> Iterator[p4r.ReadResponse]:
        dev = self.device
        try:
            self._check_device(request.device_id)
            pipeline = dev.require_pipeline()
            with dev.lock:
                found: list[p4r.Entity] = []
                for ent in request.entities:
                    found.extend(pipeline.read(ent))
        except P4RuntimeError as err:
            _abort(context, err)
        except Exception as exc:
            LOG.exception("internal error in a read")
            _abort(context, P4RuntimeError("INTERNAL", repr(exc)))
        if not found:
            yield p4r.ReadResponse()
        for i in range(0, len(found), READ_CHUNK):
            yield p4r.ReadResponse(entities=found[i : i + READ_CHUNK])

    # ------------------------------------------------------ pipeline config
    def SetForwardingPipelineConfig(
        self, request: p4r.SetForwardingPipelineConfigRequest, context: grpc.ServicerContext
    ) -> p4r.SetForwardingPipelineConfigResponse:
        try:
            self._check_device(request.device_id)
            eid = U128.decode(request.election_id) if request.HasField("election_id") else None
            self.device.arbiter.check_primary(request.role, eid)
            self.device.set_pipeline(request)
        except P4RuntimeError as err:
            _abort(context, err)
        return p4r.SetForwardingPipelineConfigResponse()

    def GetForwardingPipelineConfig(
        self, request: p4r.GetForwardingPipelineConfigRequest, context: grpc.ServicerContext
    ) -> p4r.GetForwardingPipelineConfigResponse:
        R = p4r.GetForwardingPipelineConfigRequest
        try:
            self._check_device(request.device_id)
            pipeline = self.device.require_pipeline()
        except P4RuntimeError as err:
            _abort(context, err)
        config = p4r.ForwardingPipelineConfig()
        config.cookie.cookie = pipeline.cookie
        rt = request.response_type
        if rt in (R.ALL, R.P4INFO_AND_COOKIE):
            config.p4info.CopyFrom(pipeline.p4info)
        if rt in (R.ALL, R.DEVICE_CONFIG_AND_COOKIE):
            config.p4_device_config = pipeline.device_config
        return p4r.GetForwardingPipelineConfigResponse(config=config)

    # ----------------------------------------------------------- StreamChannel
    def StreamChannel(
        self, request_iterator: Iterator[p4r.StreamMessageRequest], context: grpc.ServicerContext
    ) -> Iterator[p4r.StreamMessageResponse]:
        stream = ControllerStream(peer=context.peer())
        context.add_callback(stream.close)
        reader = threading.Thread(
            target=self._read_stream,
            args=(stream, request_iterator),
            name="p4rt-stream",
            daemon=True,
        )
        reader.start()
        try:
            while True:
                msg = stream.next()
                if msg is None:
                    return
                if isinstance(msg, P4RuntimeError):
                    _abort(context, msg)
                yield msg
        finally:
            stream.close()
            self.device.arbiter.remove(stream)

    def _read_stream(
        self, stream: ControllerStream, requests: Iterator[p4r.StreamMessageRequest]
    ) -> None:
        try:
            for req in requests:
                try:
                    self._handle_stream_request(stream, req)
                except P4RuntimeError as err:
                    if req.WhichOneof("update") == "arbitration":
                        # arbitration failures end the stream, like BMv2/PI
                        stream.close(err)
                        return
                    stream.send(_stream_error(err, req))
                except Exception as exc:
                    LOG.exception("internal error on a stream")
                    stream.send(_stream_error(P4RuntimeError("INTERNAL", repr(exc)), req))
        except Exception:  # the client went away (grpc raises on a cancelled iterator)
            pass
        finally:
            self.device.arbiter.remove(stream)
            stream.close()

    def _handle_stream_request(
        self, stream: ControllerStream, req: p4r.StreamMessageRequest
    ) -> None:
        kind = req.WhichOneof("update")
        if kind == "arbitration":
            self._check_device(req.arbitration.device_id)
            self.device.arbiter.arbitrate(stream, req.arbitration)
            return
        if not stream.arbitrated:
            raise P4RuntimeError("FAILED_PRECONDITION", "send a MasterArbitrationUpdate first")
        if kind == "packet":
            self.device.arbiter.check_primary(stream.role, stream.election_id)
            self.device.packet_out(req.packet)
        elif kind == "digest_ack":
            self.device.digest_ack(req.digest_ack)
        elif kind is None:
            raise invalid("empty StreamMessageRequest")
        else:
            raise P4RuntimeError("UNIMPLEMENTED", f"stream message {kind} is not supported")


def _stream_error(err: P4RuntimeError, req: p4r.StreamMessageRequest) -> p4r.StreamMessageResponse:
    se = p4r.StreamError(canonical_code=err.canonical_code, message=err.message)
    if req.WhichOneof("update") == "packet":
        se.packet_out.packet_out.CopyFrom(req.packet)
    elif req.WhichOneof("update") == "digest_ack":
        se.digest_list_ack.digest_list_ack.CopyFrom(req.digest_ack)
    return p4r.StreamMessageResponse(error=se)


@dataclass
class Server:
    """A running gRPC server with the P4Runtime service of one device."""

    device: Device
    grpc_server: Any
    address: str
    port: int

    def stop(self, grace: float | None = 1.0) -> None:
        self.grpc_server.stop(grace).wait()
        self.device.close()


def tls_credentials(directory: str | Path, name: str = "switch") -> grpc.ServerCredentials:
    """Mutual TLS from a PKI directory (`ca.crt`, `<name>.crt`, `<name>.key`: mgmt/pki.py's
    layout): the server's certificate, and clients must show one signed by the CA."""
    d = Path(directory)
    try:
        ca, cert, key = ((d / f).read_bytes() for f in ("ca.crt", f"{name}.crt", f"{name}.key"))
    except OSError as exc:
        raise OSError(f"TLS: {exc}") from exc
    return grpc.ssl_server_credentials([(key, cert)], root_certificates=ca,
                                       require_client_auth=True)


def serve(device: Device, address: str = "127.0.0.1:9559", max_workers: int = 32,
          tls: grpc.ServerCredentials | None = None) -> Server:
    """Start the P4Runtime service for `device` on `address` (host:port; port 0 picks one); over
    mutual TLS with `tls` (`tls_credentials`), else plaintext."""
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="p4rt"),
        options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE),
            ("grpc.max_send_message_length", MAX_MESSAGE),
            ("grpc.so_reuseport", 0),
        ],
    )
    p4r_grpc.add_P4RuntimeServicer_to_server(P4RuntimeService(device), server)
    port = server.add_secure_port(address, tls) if tls else server.add_insecure_port(address)
    if port == 0:
        raise OSError(f"cannot listen on {address}")
    server.start()
    return Server(device, server, address, port)
