//! Print-quality exports of the load chart (browser only): the chart drawn as SVG by
//! plotters' SVG backend, legend and verdict included ([`crate::chart::load_svg`]), saved
//! as it is, or rasterised at twice its pixel size into a PNG.

use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

fn download(name: &str, href: &str) {
    let Ok(a) = document().create_element("a") else {
        return;
    };
    let a: web_sys::HtmlAnchorElement = a.unchecked_into();
    a.set_href(href);
    a.set_download(name);
    a.click();
}

fn document() -> web_sys::Document {
    leptos::prelude::document()
}

/// Saves `svg` as `name`.
pub fn save_svg(name: &str, svg: &str) {
    let url = gloo_file::ObjectUrl::from(gloo_file::Blob::new_with_options(
        svg,
        Some("image/svg+xml"),
    ));
    download(name, &url);
}

/// Saves `svg` (drawn at `w` × `h` px) as a PNG of 2w × 2h pixels.
///
/// # Errors
/// The browser's message when the image cannot be decoded or drawn.
pub async fn save_png_2x(name: &str, svg: &str, w: u32, h: u32) -> Result<(), String> {
    let url = gloo_file::ObjectUrl::from(gloo_file::Blob::new_with_options(
        svg,
        Some("image/svg+xml"),
    ));
    let img = web_sys::HtmlImageElement::new().map_err(|e| format!("{e:?}"))?;
    let loaded = js_sys::Promise::new(&mut |resolve, reject| {
        img.set_onload(Some(&resolve));
        img.set_onerror(Some(&reject));
    });
    img.set_src(&url);
    JsFuture::from(loaded)
        .await
        .map_err(|_| "the chart's SVG could not be decoded".to_string())?;
    let canvas: web_sys::HtmlCanvasElement = document()
        .create_element("canvas")
        .map_err(|e| format!("{e:?}"))?
        .unchecked_into();
    canvas.set_width(2 * w);
    canvas.set_height(2 * h);
    let ctx: web_sys::CanvasRenderingContext2d = canvas
        .get_context("2d")
        .map_err(|e| format!("{e:?}"))?
        .ok_or("no 2d context")?
        .unchecked_into();
    ctx.set_fill_style_str("white");
    ctx.fill_rect(0.0, 0.0, 2.0 * w as f64, 2.0 * h as f64);
    ctx.draw_image_with_html_image_element_and_dw_and_dh(
        &img,
        0.0,
        0.0,
        2.0 * w as f64,
        2.0 * h as f64,
    )
    .map_err(|e| format!("{e:?}"))?;
    let png = canvas
        .to_data_url_with_type("image/png")
        .map_err(|e| format!("{e:?}"))?;
    download(name, &png);
    Ok(())
}
