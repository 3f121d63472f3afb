fn main() {
    // Keep the library mapped after dlclose: NCCL unloads the plugin when its last
    // communicator goes away, while our drain/link/send threads may still be running.
    println!("cargo::rustc-cdylib-link-arg=-Wl,-z,nodelete");
}
