# Sourced by the scripts: where the project's virtual environment is (scripts/install-deps.sh
# makes it) and the Python in it, whose torch wheel the build links and the tests trace with.
#   PLACEMENT_VENV  the environment's folder (default: .venv in the checkout)
placement_venv=${PLACEMENT_VENV:-$root/.venv}
placement_python=$placement_venv/bin/python3  # the name CMake picks too (PLACEMENT_MODEL_PYTHON)
