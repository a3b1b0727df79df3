# LibTorch: capture, the placed engine and the learned policies need it; everything else builds
# without. The supported floor is 2.11, PyPI's torch wheel (scripts/install-deps.sh puts it in .venv
# and scripts/build.sh points CMAKE_PREFIX_PATH at it): the version the GPU machine runs and CI tests.
#
# Sets PLACEMENT_HAVE_TORCH, PLACEMENT_TORCH_SITE (the site-packages of a wheel's LibTorch, else
# empty), PLACEMENT_TORCH_RPATH (where installed binaries that link LibTorch find it: a wheel's is
# in no system library directory), PLACEMENT_MODEL_PYTHON (cache) and the target
# placement_libtorch, which is what the project's LibTorch users link.
set(PLACEMENT_WITH_TORCH AUTO CACHE STRING "LibTorch support: ON, OFF or AUTO")
set(PLACEMENT_HAVE_TORCH OFF)
set(PLACEMENT_TORCH_SITE "")
set(PLACEMENT_TORCH_RPATH "")
set(torch_hint "run scripts/install-deps.sh and configure with "
               "-DCMAKE_PREFIX_PATH=$(.venv/bin/python -c 'import torch; print(torch.utils.cmake_prefix_path)')")
# Under pip (scikit-build-core), the torch of the Python running the build is the one: the package
# goes into that environment, and its extension must load beside that torch's own libraries.
if(DEFINED SKBUILD)
  string(CONCAT pip_hint "install torch 2.11 or newer there first, then build without pip's isolated "
                "build environment, which holds no torch: pip install --no-build-isolation <source "
                "or sdist> (with scikit-build-core installed too: docs/python.md)")
  execute_process(
    COMMAND "${Python_EXECUTABLE}" -c "import torch; print(torch.__version__); print(torch.utils.cmake_prefix_path)"
    OUTPUT_VARIABLE pip_torch ERROR_VARIABLE pip_torch_error RESULT_VARIABLE pip_torch_failed
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(pip_torch_failed)
    string(REGEX REPLACE ".*\n([^\n]+)\n*$" "\\1" pip_torch_error "\n${pip_torch_error}")
    message(FATAL_ERROR "placement builds against the torch of the environment it installs into, and "
                        "${Python_EXECUTABLE} cannot import one (${pip_torch_error}): ${pip_hint}")
  endif()
  string(REPLACE "\n" ";" pip_torch "${pip_torch}")
  list(GET pip_torch 0 pip_torch_version)
  list(GET pip_torch 1 pip_torch_prefix)
  if(pip_torch_version VERSION_LESS 2.11)
    message(FATAL_ERROR "placement needs torch 2.11 or newer; ${Python_EXECUTABLE} has torch "
                        "${pip_torch_version}: pip install 'torch>=2.11', then build again")
  endif()
  list(PREPEND CMAKE_PREFIX_PATH "${pip_torch_prefix}")
  set(PLACEMENT_WITH_TORCH ON)
  set(PLACEMENT_MODEL_PYTHON "${Python_EXECUTABLE}" CACHE FILEPATH "The Python the package is built for" FORCE)
endif()
if(NOT PLACEMENT_WITH_TORCH STREQUAL "OFF")
  find_package(Torch QUIET)
  if(Torch_FOUND AND Torch_VERSION VERSION_LESS 2.11)
    message(FATAL_ERROR "LibTorch ${Torch_VERSION} found (${TORCH_INSTALL_PREFIX}); placementd needs 2.11 or newer: ${torch_hint}")
  elseif(Torch_FOUND)
    set(PLACEMENT_HAVE_TORCH ON)
  elseif(PLACEMENT_WITH_TORCH STREQUAL "ON")
    message(FATAL_ERROR "PLACEMENT_WITH_TORCH=ON but LibTorch was not found: ${torch_hint}")
  endif()
endif()
message(STATUS "placementd: LibTorch ${PLACEMENT_HAVE_TORCH} ${Torch_VERSION}")
if(NOT PLACEMENT_HAVE_TORCH)
  return()
endif()

# A wheel's LibTorch sits in site-packages/torch, beside the nvidia/ wheels it loads (CUDA runtime,
# NVRTC, NCCL ...) and under the Python that installed it.
get_filename_component(torch_site "${TORCH_INSTALL_PREFIX}/.." ABSOLUTE)
if(EXISTS "${torch_site}/torch/__init__.py")
  set(PLACEMENT_TORCH_SITE "${torch_site}")
endif()
get_filename_component(PLACEMENT_TORCH_RPATH "${TORCH_INSTALL_PREFIX}/lib" REALPATH)

# LibTorch's CMake config names some libraries from elsewhere than the LibTorch found: libc10 from
# the system's directories first (find_library with PATHS; Debian's libtorch-dev has a 1.13 one),
# the CUDA runtime and NVRTC from the CUDA toolkit. The process then loads two copies of a library
# (or the run path cannot say which), so the wheel's own are linked instead.
function(placement_use_own_library variable own)
  get_filename_component(own_real "${own}" REALPATH)
  get_filename_component(named_real "${${variable}}" REALPATH)
  if(EXISTS "${own_real}" AND NOT named_real STREQUAL own_real)
    message(STATUS "placementd: linking ${own}, not ${${variable}}")
    set(libraries "")
    foreach(library IN LISTS TORCH_LIBRARIES)
      if(library STREQUAL "${${variable}}")
        set(library "${own}")
      endif()
      list(APPEND libraries "${library}")
    endforeach()
    set(TORCH_LIBRARIES "${libraries}" PARENT_SCOPE)
  endif()
endfunction()
placement_use_own_library(c10_LIBRARY "${TORCH_INSTALL_PREFIX}/lib/libc10.so")
if(PLACEMENT_TORCH_SITE)
  file(GLOB wheel_nvrtc "${PLACEMENT_TORCH_SITE}/nvidia/cu*/lib/libnvrtc.so.[0-9]*")
  file(GLOB wheel_cudart "${PLACEMENT_TORCH_SITE}/nvidia/cu*/lib/libcudart.so.[0-9]*")
  if(wheel_nvrtc AND CUDA_NVRTC_LIB)
    list(GET wheel_nvrtc 0 wheel_nvrtc)
    placement_use_own_library(CUDA_NVRTC_LIB "${wheel_nvrtc}")
  endif()
  if(wheel_cudart AND TARGET torch::cudart)
    list(GET wheel_cudart 0 wheel_cudart)
    message(STATUS "placementd: CUDA runtime ${wheel_cudart}")
    # Installed binaries that need the wheel's CUDA runtime directly find it beside LibTorch's.
    get_filename_component(wheel_cudart_dir "${wheel_cudart}" DIRECTORY)
    get_filename_component(wheel_cudart_dir "${wheel_cudart_dir}" REALPATH)
    list(APPEND PLACEMENT_TORCH_RPATH "${wheel_cudart_dir}")
    set_target_properties(torch::cudart PROPERTIES INTERFACE_LINK_LIBRARIES "${wheel_cudart}"
                          INTERFACE_INCLUDE_DIRECTORIES "${CUDAToolkit_INCLUDE_DIRS}")
  endif()
endif()

# In a wheel, run paths are relative: the package's libraries sit in site-packages/placement, beside
# site-packages/torch and the nvidia/ wheels, wherever that environment lives.
if(DEFINED SKBUILD AND PLACEMENT_TORCH_SITE)
  get_filename_component(site_real "${PLACEMENT_TORCH_SITE}" REALPATH)
  set(relative_rpath "")
  foreach(dir IN LISTS PLACEMENT_TORCH_RPATH)
    file(RELATIVE_PATH below_site "${site_real}" "${dir}")
    list(APPEND relative_rpath "$ORIGIN/../${below_site}")
  endforeach()
  set(PLACEMENT_TORCH_RPATH "${relative_rpath}")
endif()

# PyPI's LibTorch also exports copies of libstdc++ functions it links statically (std::filesystem,
# std::chrono::tzdb; pytorch/pytorch#133437), and a program that finds those before libstdc++'s
# crashes in them (std::filesystem::remove_all jumps to 0). Naming libstdc++ before anything else
# makes it the first library a program needs, which puts its definitions first in the lookup. It
# goes to the linker inside one -Wl, which no compiler driver reads: on the 2026-11-27 GPU machine,
# with a plain -lstdc++ first on every link line, no program needed libstdc++ at all, the driver
# or a wrapper around it having taken that -lstdc++ elsewhere (docs/gpu-runs/2026-11-27.md).
# A toolchain may offer only the static libstdc++.a (the GPU machine's wraps GCC with one;
# docs/gpu-runs/2026-11-27-2.md): -lstdc++ then links a second copy of libstdc++ into each program
# beside the one LibTorch loads. There the shared libstdc++.so.6 is named by its path instead.
execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libstdc++.so
                OUTPUT_VARIABLE toolchain_libstdcxx OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
set(libstdcxx_first "-lstdc++")
if(NOT IS_ABSOLUTE "${toolchain_libstdcxx}")
  find_library(PLACEMENT_SHARED_LIBSTDCXX NAMES libstdc++.so.6
               DOC "the shared libstdc++ programs linking LibTorch need first")
  if(NOT PLACEMENT_SHARED_LIBSTDCXX)
    message(FATAL_ERROR "${CMAKE_CXX_COMPILER} finds no shared libstdc++ (libstdc++.so), and no "
            "libstdc++.so.6 is on the library path: set PLACEMENT_SHARED_LIBSTDCXX to the "
            "libstdc++.so.6 LibTorch loads; a libstdc++ linked statically beside LibTorch's crashes")
  endif()
  set(libstdcxx_first "${PLACEMENT_SHARED_LIBSTDCXX}")
  message(STATUS "libstdc++ for programs linking LibTorch: ${libstdcxx_first} "
          "(${CMAKE_CXX_COMPILER} links only a static one)")
endif()
add_library(placement_libtorch INTERFACE)
target_link_libraries(placement_libtorch INTERFACE ${TORCH_LIBRARIES})
target_link_options(placement_libtorch INTERFACE
                    "LINKER:--push-state,--no-as-needed,${libstdcxx_first},--pop-state")

# The Python whose torch this LibTorch is traces the test models, so that the TorchScript they are
# saved as is what this LibTorch's own tracer emits.
set(default_model_python "")
foreach(candidate "${PLACEMENT_TORCH_SITE}/../../../bin/python3" "${PLACEMENT_TORCH_SITE}/../../../bin/python")
  if(PLACEMENT_TORCH_SITE AND NOT default_model_python AND EXISTS "${candidate}")
    get_filename_component(default_model_python "${candidate}" ABSOLUTE)
  endif()
endforeach()
if(NOT default_model_python)
  find_program(default_model_python NAMES python3 python)
endif()
set(PLACEMENT_MODEL_PYTHON "${default_model_python}" CACHE FILEPATH
    "Python with the torch of the LibTorch built against, torchvision and transformers: traces the test models")
