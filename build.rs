// The SONAME lets `-lcudampi` programs record libcudampi.so.0, so an upgrade can replace the file.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libcudampi.so.0");
}
