#!/usr/bin/env bash
# The outside clients the rich-results and Jupyter tests drive the engine with (test/e2e/jupyter-gateway.e2e-spec.ts,
# test/e2e/jupyterlab.e2e-spec.ts, test/e2e/rich-results.e2e-spec.ts), from PyPI, in a venv at
# $SWITCHYARD_RUNTIME_DIR/client-venv (default <repo>/.runtime/client-venv):
#   - jupyter_server (its gateway kernel manager and client), nbclient, nbformat and jupyter_client: real Jupyter
#     clients run notebooks and cells against a session's Jupyter endpoint;
#   - jupyterlab: a real JupyterLab with `--gateway-url`, driven in Chromium (it pulls in ipykernel and IPython,
#     unused here: its kernels are the session's);
#   - anthropic and openai: their own types (pydantic) check the tool-call answers' image content.
#
#   bash scripts/client-tools.sh   # install what is missing (idempotent; quick when all is there)
#
# Versions are pinned here, with every package they pull in (CONSTRAINTS), so a new release of a dependency cannot
# change what CI checks. A venv that already holds the pinned versions is left alone; one that does not is rebuilt.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUNTIME_DIR="${SWITCHYARD_RUNTIME_DIR:-$REPO/.runtime}"
VENV="$RUNTIME_DIR/client-venv"
PYTHON="${SWITCHYARD_CLIENT_PYTHON:-python3}"

TOOLS="jupyter_server==2.21.1 nbclient==0.11.0 nbformat==5.11.1 jupyter_client==8.10.0 jupyterlab==4.6.6 anthropic==2.14.0 openai==3.57.0"

# `pip freeze` of a venv holding exactly the tools above (Python 3.11).
CONSTRAINTS="
annotated-types==0.8.0
anthropic==2.14.0
anyio==4.16.0
argon2-cffi==25.1.0
argon2-cffi-bindings==26.2.0
arrow==1.4.0
asttokens==3.0.2
async-lru==2.4.0
attrs==26.1.0
babel==2.19.0
beautifulsoup4==4.15.0
bleach==6.4.0
certifi==2026.10.19.post1
cffi==2.1.1
charset-normalizer==3.5.3
comm==0.2.3
debugpy==1.8.22
defusedxml==0.7.1
docstring_parser==0.18.0
executing==2.3.0
fastjsonschema==2.22.3
fqdn==1.6.0
h11==0.16.0
httpcore==1.0.9
httpcore2==2.16.2
httpx==0.28.1
httpx2==2.16.2
idna==3.20
ipykernel==7.4.0
ipython==9.18.1
ipython_pygments_lexers==1.1.1
isoduration==20.11.0
jedi==0.20.1
Jinja2==3.1.6
jiter==0.19.0
json5==0.17.3
jsonpointer==3.12
jsonschema==4.26.0
jsonschema-specifications==2025.9.1
jupyter-events==0.12.1
jupyter-lsp==2.3.1
jupyter_builder==1.3.0
jupyter_client==8.10.0
jupyter_core==5.9.1
jupyter_server==2.21.1
jupyter_server_terminals==0.5.4
jupyterlab==4.6.6
jupyterlab_pygments==0.3.0
jupyterlab_server==2.28.1
lark==1.3.1
MarkupSafe==3.0.4
matplotlib-inline==0.2.2
mistune==3.4.0
nbclient==0.11.0
nbconvert==7.17.2
nbformat==5.11.1
nest-asyncio2==1.7.4
notebook_shim==0.2.4
openai==3.57.0
opentelemetry-api==1.45.2
overrides==7.7.0
packaging==26.4
pandocfilters==1.5.1
parso==0.8.7
pexpect==4.9.0
platformdirs==4.14.8
prometheus_client==0.26.0
prompt_toolkit==3.0.53
psutil==7.2.2
ptyprocess==0.7.0
pure_eval==0.2.4
pycparser==3.12
pydantic==2.14.4
pydantic_core==2.50.5
Pygments==2.21.0
python-dateutil==4.0.0
python-json-logger==4.2.0
PyYAML==6.0.4
pyzmq==27.3.0
referencing==0.37.0
requests==2.34.2
rfc3339-validator==0.1.4
rfc3986-validator==0.1.1
rfc3987-syntax==1.1.0
rpds-py==2026.9.1
Send2Trash==2.2.0
six==1.17.0
sniffio==1.3.1
soupsieve==4.1.3
stack-data==0.6.3
terminado==0.18.1
tinycss2==1.5.1
tornado==6.6.1
traitlets==5.16.1
truststore==0.10.5
typing-inspection==0.4.5
typing_extensions==4.16.0
tzdata==2026.6
uri-template==1.3.0
urllib3==2.8.0
wcwidth==0.9.4
webcolors==25.10.0
webencodings==0.6.1
websocket-client==1.9.2
"

# shellcheck source=scripts/pinned-venv.sh
. "$REPO/scripts/pinned-venv.sh"
pinned_venv client-tools "$VENV" "$PYTHON" "$TOOLS" "$CONSTRAINTS"
