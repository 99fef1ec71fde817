// Package hub fetches checkpoints from the Hugging Face Hub into the Hugging Face cache shared
// with Python's huggingface_hub, and finds them there offline.
//
// It owns the cache layout (models--Org--Name/{blobs,snapshots/<commit>,refs}/, the cache folder
// from HF_HUB_CACHE / HF_HOME), the Hub's HTTP protocol (revision lookup, resolve URLs, LFS
// redirects with X-Linked-Etag), resumable downloads checked against their ETag, the per-blob
// locks it shares with Python, tokens (HF_TOKEN, the login token file), offline mode
// (HF_HUB_OFFLINE), its timeouts and deadlines, and the fallback to the cache when the Hub
// fails (ErrUnreachable). It trusts neither the Hub nor the cache: names are escaped before they
// are shown, the token goes to the endpoint's origin only, nothing is opened through a link
// where the cache keeps its own files, every snapshot file must resolve inside the cache, and
// announced sizes are checked before a download. It knows nothing of what the files hold:
// checking them is the loader package's job (safetensors, shard index, manifests).
package hub
