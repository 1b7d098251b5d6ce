//! With the `mpi` feature: finds the system's MPI and compiles the C shim that exports the
//! values MPI defines only as C macros.

fn main() {
    #[cfg(feature = "mpi")]
    shim::build();
}

#[cfg(feature = "mpi")]
mod shim {
    const MISSING: &str = "hvd-mpi (the `mpi` feature of hvd) needs an MPI library with its \
        development files and mpicc, found neither through mpicc nor pkg-config.\n\
        Install Open MPI: apt-get install openmpi-bin libopenmpi-dev libclang-dev clang pkg-config\n\
        or MPICH: apt-get install mpich libmpich-dev libclang-dev clang pkg-config\n\
        (or build without the `mpi` feature: the default build needs no MPI)";

    pub fn build() {
        println!("cargo::rerun-if-changed=src/shim.c");
        let library = match build_probe_mpi::probe() {
            Ok(library) => library,
            Err(reasons) => {
                let reasons: Vec<String> = reasons.iter().map(|r| r.to_string()).collect();
                panic!("{MISSING}\nWhat was tried:\n{}", reasons.join("\n"));
            }
        };
        let mut build = cc::Build::new();
        build.file("src/shim.c");
        match library.mpicc {
            Some(mpicc) => {
                build.compiler(mpicc);
            }
            None => {
                build.includes(&library.include_paths);
            }
        }
        build.compile("hvd_mpi_shim");
    }
}
