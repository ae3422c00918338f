//! The page's entry point: mounts [`app::ui::App`].

#[cfg(target_arch = "wasm32")]
fn main() {
    leptos::mount::mount_to_body(app::ui::App);
}

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    eprintln!("the kvqueue page runs in a browser: build it with `node app/build.mjs`");
}
