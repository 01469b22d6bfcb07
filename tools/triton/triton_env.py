"""A Triton Inference Server for Peregrine's backend, on loopback: the virtual environment that
holds the server (the PyPI wheel nvidia-pytriton ships the Triton 2.51.0 binary) and its
clients, and a server process started on free ports and stopped by its process id.

Used by tests/serving/test_triton.py, bench/triton_throughput.py and scripts/serve_demo.py.
"""
import importlib.util
import pathlib
import signal
import socket
import subprocess
import sys
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "python_env"))
import venvs  # noqa: E402

# nvidia-pytriton pins numpy < 2 and a dozen packages it needs only for its own Python API: it is
# installed without them, for the server binary it carries.
VENV_NAME = "triton-venv"
PYTRITON = "nvidia-pytriton==0.7.0"
CLIENTS = ["tritonclient[http,grpc]==2.73.0"]


def reexec_in_venv():
    """Runs the calling script again inside the Triton venv unless it already runs there."""
    venvs.reexec_in_venv(VENV_NAME, CLIENTS, no_deps=[PYTRITON])


def tritonserver_binary():
    # The wheel's package folder holds the server; importing the package would need the
    # dependencies left out.
    spec = importlib.util.find_spec("pytriton")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"error: {PYTRITON} is not installed in {sys.prefix}")
    path = pathlib.Path(list(spec.submodule_search_locations)[0]) / "tritonserver" / "bin" / "tritonserver"
    if not path.exists():
        raise SystemExit(f"error: {PYTRITON} has no server binary at {path}")
    return path


def free_ports(n):
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


class Server:
    """tritonserver with Peregrine's backend on 127.0.0.1; `with Server(...) as s:` stops it."""

    def __init__(self, model_repository, backend_dir=None, models=None, log_path=None,
                 extra_args=()):
        self.http_port, self.grpc_port, self.metrics_port = free_ports(3)
        backend_dir = backend_dir or ROOT / "build" / "triton"
        if not (pathlib.Path(backend_dir) / "peregrine" / "libtriton_peregrine.so").exists():
            raise SystemExit(f"error: no peregrine/libtriton_peregrine.so under {backend_dir} "
                             "(run make build)")
        cmd = [str(tritonserver_binary()), f"--model-repository={model_repository}",
               f"--backend-directory={backend_dir}",
               "--http-address=127.0.0.1", f"--http-port={self.http_port}",
               "--grpc-address=127.0.0.1", f"--grpc-port={self.grpc_port}",
               "--metrics-address=127.0.0.1", f"--metrics-port={self.metrics_port}",
               "--allow-metrics=true", "--allow-gpu-metrics=false"]
        if models is not None:
            cmd += ["--model-control-mode=explicit"] + [f"--load-model={m}" for m in models]
        cmd += list(extra_args)
        self.log_path = log_path
        self.log = open(log_path, "w") if log_path else subprocess.DEVNULL
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)

    @property
    def http_url(self):
        return f"127.0.0.1:{self.http_port}"

    @property
    def grpc_url(self):
        return f"127.0.0.1:{self.grpc_port}"

    def wait_ready(self, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"tritonserver exited with {self.proc.returncode} "
                                   f"(log: {self.log_path})")
            try:
                with urllib.request.urlopen(f"http://{self.http_url}/v2/health/ready",
                                            timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"tritonserver not ready after {timeout} s (log: {self.log_path})")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.log is not subprocess.DEVNULL:
            self.log.close()

    def __enter__(self):
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()
