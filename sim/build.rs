//! Builds the C-variadic logger handed to v4+ plugins (stable Rust cannot define variadics).
fn main() {
    println!("cargo:rerun-if-changed=csrc/logger.c");
    cc::Build::new()
        .file("csrc/logger.c")
        .warnings(true)
        .compile("ncclprof_sim_logger");
}
