# `cpack -G DEB` in the build directory: placementd_<version>_<arch>.deb, what `cmake --install
# --prefix /usr` lays out (binaries, plugins, SDK, units, sysusers entry, docs), with
# /etc/placementd/placementd.toml as a conffile (dpkg keeps an admin's edits and asks on upgrade)
# and maintainer scripts that create the `placement` group and enable the socket
# (packaging/deb/). Library dependencies come from dpkg-shlibdeps.
#
# LibTorch is the exception: Debian has no 2.11, so the LibTorch-based parts load the PyPI wheel's
# from the directories the build found it in (their run path), and the package's preinst refuses
# to install where those are missing. Build the package on a machine whose LibTorch sits where the
# target machines' does (the same virtual environment path), or configure with
# PLACEMENT_PACKAGE_TORCH_DIRS naming the target's directories.
set(PLACEMENT_PACKAGE_TORCH_DIRS "${PLACEMENT_TORCH_RPATH}" CACHE STRING
    "Directories the packaged LibTorch-based binaries load LibTorch (and the wheel's CUDA runtime) from")
if(NOT PLACEMENT_PACKAGE_TORCH_DIRS STREQUAL PLACEMENT_TORCH_RPATH)
  set(PLACEMENT_TORCH_RPATH "${PLACEMENT_PACKAGE_TORCH_DIRS}")
endif()
string(REPLACE ";" " " package_torch_dirs "${PLACEMENT_PACKAGE_TORCH_DIRS}")

set(deb_scripts "${CMAKE_BINARY_DIR}/packaging/deb")
file(MAKE_DIRECTORY "${deb_scripts}")
foreach(script postinst prerm postrm conffiles)
  configure_file("${PROJECT_SOURCE_DIR}/packaging/deb/${script}" "${deb_scripts}/${script}" COPYONLY)
endforeach()
set(control_extra "${deb_scripts}/conffiles;${deb_scripts}/postinst;${deb_scripts}/prerm;${deb_scripts}/postrm")
if(PLACEMENT_HAVE_TORCH)
  file(READ "${PROJECT_SOURCE_DIR}/packaging/deb/preinst.in" preinst)
  string(REPLACE "@PLACEMENT_PACKAGE_TORCH_DIRS@" "${package_torch_dirs}" preinst "${preinst}")
  string(REPLACE "@Torch_VERSION@" "${Torch_VERSION}" preinst "${preinst}")
  file(WRITE "${deb_scripts}/preinst" "${preinst}")
  file(CHMOD "${deb_scripts}/preinst" PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
             WORLD_READ WORLD_EXECUTE)
  list(APPEND control_extra "${deb_scripts}/preinst")
endif()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME placementd)
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "learns device placements for training jobs while they train")
set(CPACK_PACKAGE_DESCRIPTION "A per-node daemon that learns where each operation of a training job should run
(device placement) while the job trains, from its live step times, and hot-swaps placements between
steps. Groupers, placers and learning algorithms are plugins chosen in /etc/placementd/placementd.toml;
jobs attach through the SDK over a Unix socket; placementctl shows what happens.")
set(CPACK_PACKAGE_CONTACT "placementd developers <placementd@localhost>")
# The install code decides where the config and units go from the prefix it is given (/usr puts
# the config in /etc): it must see /usr itself, with the staging directory as DESTDIR.
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION misc)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "systemd")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA "${control_extra}")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS OFF)
include(CPack)
