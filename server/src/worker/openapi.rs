//! The worker API's OpenAPI 3.1 document, generated from the handlers' `#[utoipa::path]`
//! annotations and the wire types' `ToSchema` derives, served at `GET /openapi.json`
//! (without a token: it describes the API, it holds no data).

use axum::Json;
use axum::response::{IntoResponse, Response};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

struct Bearer;

impl Modify for Bearer {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "wasbox worker API",
        description = "The worker API of a wasbox node: CyNodeAI's worker API (jobs, session sandboxes, PTYs) and worker telemetry API, wasbox's submit-and-poll jobs, and operations. Errors are RFC 9457 problems.",
    ),
    paths(
        super::jobs::run,
        super::jobs::submit,
        super::jobs::get,
        super::jobs::delete,
        super::jobs::stop,
        super::jobs::stop_all,
        super::sessions::create,
        super::sessions::get,
        super::sessions::exec,
        super::sessions::end,
        super::sessions::read_file,
        super::sessions::write_file,
        super::snapshots::snapshot_route,
        super::snapshots::fork_route,
        super::snapshots::restore,
        super::snapshots::list,
        super::snapshots::download,
        super::snapshots::delete,
        super::volumes::create,
        super::volumes::list,
        super::volumes::get,
        super::volumes::delete,
        super::pty::open,
        super::pty::send,
        super::pty::recv,
        super::pty::resize,
        super::pty::close,
        super::telemetry_api::node_info,
        super::telemetry_api::node_stats,
        super::telemetry_api::containers,
        super::telemetry_api::container,
        super::telemetry_api::logs,
        super::metrics,
        super::healthz,
        super::readyz,
    ),
    components(
        schemas(crate::problem::Problem),
        responses(crate::problem::ProblemResponse)
    ),
    modifiers(&Bearer),
)]
pub struct WorkerApi;

/// `GET /openapi.json`.
pub async fn document() -> Response {
    Json(WorkerApi::openapi()).into_response()
}
