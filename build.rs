// The SONAME lets `-lcudampi` programs record libcudampi.so.0, so an upgrade can replace the file.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libcudampi.so.0");
    // Without it cargo reruns this script, and rebuilds the library, after any file of the
    // package changes, a README edit included.
    println!("cargo:rerun-if-changed=build.rs");
}
