//! What a drop (or the file picker) hands the page (browser only): plain files, whole
//! folders (walked through the File and Directory Entries API) and zip archives, read into
//! [`Dropped`] — loose files by name, each folder or zip as its [`FolderFile`]s.

use crate::measured::folder::{unzip, FolderFile};
use crate::measured::{check_size, MAX_BYTES};
use js_sys::{Array, Promise};
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use web_sys::{FileSystemDirectoryEntry, FileSystemEntry, FileSystemFileEntry};

/// Everything dropped at once.
#[derive(Debug, Default)]
pub struct Dropped {
    /// Loose files: (name, text).
    pub files: Vec<(String, String)>,
    /// Each folder or zip: its name and files.
    pub folders: Vec<(String, Vec<FolderFile>)>,
    /// A line per thing that could not be read.
    pub problems: Vec<String>,
}

/// Entries of a drop, taken while the drop event runs (its data go away after it).
pub fn entries(dt: &web_sys::DataTransfer) -> Vec<FileSystemEntry> {
    let items = dt.items();
    (0..items.length())
        .filter_map(|i| items.get(i))
        .filter(|it| it.kind() == "file")
        .filter_map(|it| it.webkit_get_as_entry().ok().flatten())
        .collect()
}

async fn bytes_of(f: &web_sys::File) -> Result<Vec<u8>, String> {
    check_size(f.size()).map_err(|e| e.to_string())?;
    let buf = JsFuture::from(f.array_buffer())
        .await
        .map_err(|e| format!("could not read the file ({e:?})"))?;
    Ok(js_sys::Uint8Array::new(&buf).to_vec())
}

async fn file_of(e: &FileSystemFileEntry) -> Result<web_sys::File, String> {
    let p = Promise::new(&mut |resolve, reject| {
        e.file_with_callback_and_callback(&resolve, &reject);
    });
    JsFuture::from(p)
        .await
        .map_err(|err| format!("could not open ({err:?})"))?
        .dyn_into::<web_sys::File>()
        .map_err(|_| "not a file".to_string())
}

/// Every file under `dir`, paths relative to the dropped folder's parent.
async fn walk(
    dir: FileSystemDirectoryEntry,
    out: &mut Vec<FolderFile>,
    problems: &mut Vec<String>,
) {
    let mut stack = vec![dir];
    let mut total = 0.0;
    while let Some(d) = stack.pop() {
        let reader = d.create_reader();
        loop {
            // readEntries hands back the entries in batches, an empty one at the end.
            let p = Promise::new(&mut |resolve, reject| {
                let _ = reader.read_entries_with_callback_and_callback(&resolve, &reject);
            });
            let batch = match JsFuture::from(p).await {
                Ok(v) => Array::from(&v),
                Err(e) => {
                    problems.push(format!("{}: could not list ({e:?})", d.full_path()));
                    break;
                }
            };
            if batch.length() == 0 {
                break;
            }
            for v in batch.iter() {
                let e: FileSystemEntry = v.unchecked_into();
                let path = e.full_path().trim_start_matches('/').to_string();
                if e.is_directory() {
                    stack.push(e.unchecked_into());
                    continue;
                }
                let f = match file_of(e.unchecked_ref()).await {
                    Ok(f) => f,
                    Err(why) => {
                        problems.push(format!("{path}: {why}"));
                        continue;
                    }
                };
                total += f.size();
                if total > MAX_BYTES {
                    problems.push(format!(
                        "the folder holds more than {:.0} MB; the rest is not read",
                        MAX_BYTES / 1048576.0
                    ));
                    return;
                }
                match bytes_of(&f).await {
                    Ok(bytes) => out.push(FolderFile { path, bytes }),
                    Err(why) => problems.push(format!("{path}: {why}")),
                }
            }
        }
    }
}

async fn add_file(f: web_sys::File, out: &mut Dropped) {
    let name = f.name();
    if name.to_ascii_lowercase().ends_with(".zip") {
        match bytes_of(&f)
            .await
            .and_then(|b| unzip(&b).map_err(|e| e.to_string()))
        {
            Ok(files) => out.folders.push((name, files)),
            Err(why) => out.problems.push(format!("{name}: {why}")),
        }
        return;
    }
    if let Err(e) = check_size(f.size()) {
        out.problems.push(format!("{name}: {e}"));
        return;
    }
    match gloo_file::futures::read_as_text(&gloo_file::File::from(f)).await {
        Ok(t) => out.files.push((name, t)),
        Err(e) => out
            .problems
            .push(format!("{name}: could not read the file ({e})")),
    }
}

/// Reads dropped entries: folders walked, zips opened, files read as text.
pub async fn read_entries(entries: Vec<FileSystemEntry>) -> Dropped {
    let mut out = Dropped::default();
    for e in entries {
        if e.is_directory() {
            let name = e.name();
            let mut files = Vec::new();
            walk(e.unchecked_into(), &mut files, &mut out.problems).await;
            out.folders.push((name, files));
        } else {
            let path = e.full_path();
            match file_of(e.unchecked_ref()).await {
                Ok(f) => add_file(f, &mut out).await,
                Err(why) => out.problems.push(format!("{path}: {why}")),
            }
        }
    }
    out
}

/// Reads files (from the picker, or the loose files of a drop); zips are opened.
pub async fn read_files(files: Vec<web_sys::File>) -> Dropped {
    let mut out = Dropped::default();
    for f in files {
        add_file(f, &mut out).await;
    }
    out
}
