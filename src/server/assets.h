/* Files built into the server (cmake/embed.cmake): the store's schema and the
 * OpenAPI document (the request schema is filled in from the option table at
 * run time).  NUL-terminated.  The web UI is embedded apart (web.h). */
#ifndef H3_SERVER_ASSETS_H
#define H3_SERVER_ASSETS_H

extern const char h3_srv_asset_schema_sql[];
extern const char h3_srv_asset_openapi_json[];

#endif
