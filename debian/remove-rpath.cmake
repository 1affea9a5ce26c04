# cmake -DF=FILE -P remove-rpath.cmake: drops FILE's RUNPATH, as `cmake --install` does. The build
# tree's programs carry one to the directory of libhdf5's development links
# (/usr/lib/x86_64-linux-gnu/hdf5/serial); installed, they find libhdf5 where the loader looks.
file(RPATH_REMOVE FILE "${F}")
