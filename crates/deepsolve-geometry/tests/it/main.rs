mod commands;
mod props;
mod svg;
